//! The JetStream directory (`<store_dir>/jetstream`) as one server's own: checked and locked
//! before anything in it is read or written.
//!
//! Everything a server stores lives below that directory: every account's streams and
//! consumers (`<ACCOUNT>/streams/…`), replicated streams' Raft logs (`…/<stream>/raft/`) and
//! the meta group's (`_meta_/raft/`). [`StoreDir::open`] takes an exclusive `flock(2)` on
//! [`LOCK_FILE`] in it, held until the [`StoreDir`] is dropped (JetStream's shutdown, after
//! every stream has synced) or the process ends, however it ends: the kernel lets go of the
//! lock of a killed process (`kill -9`) with its open files, so no stale lock is ever left to
//! clean up. A second server given the same directory (a copied cluster node config, the
//! same `-sd` twice) stops at start-up instead of writing the first one's files under it.
//! The lock file holds the owner's process id, for the second server's error line.
//!
//! nats-server 2.15.1 does not lock its store directory; its checks before the lock are
//! copied, with its words ([`StoreDirError`]).

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

use crate::os_error::go_error;

/// The lock file's name, in the JetStream directory.
pub const LOCK_FILE: &str = "jsserver.lock";

/// A JetStream directory this server holds the lock of.
#[derive(Debug)]
pub struct StoreDir {
    dir: PathBuf,
    /// Open for as long as the lock is held (closing it releases the lock).
    _lock: File,
}

/// Why the JetStream directory cannot be used. Displayed as nats-server words the checks it
/// has (after `Can't start JetStream: ` in the fatal line).
#[derive(Debug, thiserror::Error)]
pub enum StoreDirError {
    /// The directory did not exist and could not be created (`dir`: the one `mkdir` failed
    /// on).
    #[error("could not create storage directory - mkdir {}: {}", .dir.display(), go_error(.source))]
    Create {
        /// The directory `mkdir` failed on (the JetStream directory or a missing parent).
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The path exists and is not a directory.
    #[error("storage directory is not a directory")]
    NotADirectory,
    /// A file cannot be created in the directory.
    #[error("storage directory is not writable")]
    NotWritable,
    /// Another process holds the lock.
    #[error("storage directory {} is in use by {} (it holds the lock on {})",
        .dir.display(),
        .pid.map_or_else(|| "another process".to_owned(), |p| format!("process {p}")),
        .lock.display())]
    InUse {
        /// The JetStream directory.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// The holder's process id, as it wrote it in the lock file (if readable).
        pid: Option<u32>,
    },
    /// The lock could not be taken for another reason (a file system without locks).
    #[error("cannot lock storage directory {}: {}", .dir.display(), go_error(.source))]
    Lock {
        /// The JetStream directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl StoreDir {
    /// Makes `dir` ready for this server alone: creates it if missing (with its parents),
    /// checks that it is a writable directory (nats-server's checks, in its order), then
    /// takes the lock on [`LOCK_FILE`] without waiting and writes this process's id in it.
    ///
    /// # Errors
    /// [`StoreDirError`]: cannot be created, not a directory, not writable, or locked by
    /// another process.
    pub fn open(dir: &Path) -> Result<StoreDir, StoreDirError> {
        match std::fs::metadata(dir) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir).map_err(|source| StoreDirError::Create {
                    dir: first_missing(dir).to_owned(),
                    source,
                })?;
            }
            Ok(meta) if meta.is_dir() => {}
            // A file, or a path through a file (ENOTDIR): nats-server's `os.Stat` error that
            // is not "does not exist" gets the same words.
            _ => return Err(StoreDirError::NotADirectory),
        }
        probe_writable(dir)?;
        let lock = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock)
            .map_err(|_| StoreDirError::NotWritable)?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(StoreDirError::InUse {
                    dir: dir.to_owned(),
                    pid: holder(&mut file),
                    lock,
                });
            }
            Err(errno) => {
                return Err(StoreDirError::Lock {
                    dir: dir.to_owned(),
                    source: errno.into(),
                });
            }
        }
        // Ours now: who holds it, for a second server's error line. Best effort: the lock,
        // not the text, keeps the second server out.
        let _ = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| write!(file, "{}", std::process::id()))
            .and_then(|()| file.flush());
        Ok(StoreDir {
            dir: dir.to_owned(),
            _lock: file,
        })
    }

    /// The JetStream directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

/// The directory a `mkdir -p` of `dir` makes first (and so fails on, as Go's `MkdirAll`
/// names it): the shallowest ancestor of `dir` that does not exist.
fn first_missing(dir: &Path) -> &Path {
    let mut missing = dir;
    for ancestor in dir.ancestors().skip(1) {
        if ancestor.as_os_str().is_empty() || ancestor.exists() {
            break;
        }
        missing = ancestor;
    }
    missing
}

/// nats-server's check that files can be created in `dir`: a scratch file made and removed.
fn probe_writable(dir: &Path) -> Result<(), StoreDirError> {
    let probe = dir.join(format!("_test_{}", std::process::id()));
    match OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(_) => Err(StoreDirError::NotWritable),
    }
}

/// The process id written in a held lock file, if it reads as one.
fn holder(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_open_of_a_held_directory_is_refused_until_the_first_is_dropped() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("jetstream");
        let first = StoreDir::open(&dir).expect("first open creates and locks");
        assert_eq!(first.path(), dir);
        let text = std::fs::read_to_string(dir.join(LOCK_FILE)).unwrap();
        assert_eq!(text, std::process::id().to_string());
        // flock locks belong to the open file: a second open in this process conflicts too.
        let err = StoreDir::open(&dir).unwrap_err();
        assert!(
            matches!(&err, StoreDirError::InUse { pid: Some(p), .. } if *p == std::process::id()),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "storage directory {} is in use by process {} (it holds the lock on {})",
                dir.display(),
                std::process::id(),
                dir.join(LOCK_FILE).display()
            )
        );
        drop(first);
        let again = StoreDir::open(&dir).expect("free again once dropped");
        drop(again);
        // Nothing but the lock file is left behind (the writability probe is removed).
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [LOCK_FILE]);
    }

    #[test]
    fn unusable_directories_get_nats_servers_words() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(
            StoreDir::open(&file).unwrap_err().to_string(),
            "storage directory is not a directory"
        );
        assert_eq!(
            StoreDir::open(&file.join("jetstream"))
                .unwrap_err()
                .to_string(),
            "storage directory is not a directory"
        );
        let nowhere = Path::new("/proc/no-such-dir/jetstream");
        assert_eq!(
            StoreDir::open(nowhere).unwrap_err().to_string(),
            "could not create storage directory - mkdir /proc/no-such-dir: \
             no such file or directory"
        );
    }
}
