//! Caravan's deployment-watcher service (being built).
