//! End-to-end test helpers: start the real `jsserver` binary on loopback.
