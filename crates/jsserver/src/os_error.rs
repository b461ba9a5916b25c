//! OS errors in Go's words, for the log lines and errors that must read as nats-server's
//! (`listen tcp 127.0.0.1:4222: bind: address already in use`): the start-up failures, the
//! store directory, TLS files.

/// An OS error as Go words it, for log lines that must read as nats-server's: the C
/// library's text with a lower-case first letter and no ` (os error N)` (`address already in
/// use`, `no such file or directory`, `permission denied`). Errors without an OS error code
/// keep their own text.
pub fn go_error(err: &std::io::Error) -> String {
    let text = err.to_string();
    let Some(code) = err.raw_os_error() else {
        return text;
    };
    let text = text
        .strip_suffix(&format!(" (os error {code})"))
        .unwrap_or(&text);
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn os_errors_read_as_go_words_them() {
        let in_use = io::Error::from_raw_os_error(98); // EADDRINUSE
        assert_eq!(go_error(&in_use), "address already in use");
        let missing = io::Error::from_raw_os_error(2); // ENOENT
        assert_eq!(go_error(&missing), "no such file or directory");
        let other = io::Error::other("Host resolves to nothing");
        assert_eq!(go_error(&other), "Host resolves to nothing");
    }
}
