//! Caravan end to end: the real service binaries as child processes around a
//! real etcd, for the integration tests and the end-to-end benchmark.
