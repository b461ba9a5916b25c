//! The stream message stores the server runs: the file store ([`file::FileStore`]), which owns
//! its files, and, re-exported from [`jsproto::stream::store`], the store interface
//! ([`MsgStore`]), its types, the shared lookup index and the memory store, which do no IO.

pub mod file;
#[cfg(test)]
mod tests;

pub use file::{FileStore, FileStoreConfig};
pub use jsproto::stream::store::*;
