//! Function tests.
