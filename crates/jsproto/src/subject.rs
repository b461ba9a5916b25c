//! Subjects: validation, wildcard matching and the subscription index.
