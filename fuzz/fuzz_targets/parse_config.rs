//! Feeds arbitrary bytes (as text, invalid UTF-8 replaced) to the config parser and applies
//! what parses as server options, as start-up does.
//!
//! Checks, for any input: no panic, no stack overflow (nesting of maps, arrays, includes and
//! variables is bounded), no unbounded memory or time (includes and variable copies are
//! bounded); the digest of a parsed config can always be computed. `include` paths are relative
//! to the directory the fuzzer runs in.
#![no_main]

use jsserver::conf;
use jsserver::options::{refusals_in, ServerOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let text = String::from_utf8_lossy(input);
    let Ok(map) = conf::parse_str(&text) else {
        return;
    };
    let digest = conf::digest(&map);
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    let _ = refusals_in(&map);
    let mut warnings = Vec::new();
    let _ = ServerOptions::default().apply_config(&map, &mut warnings);
});
