//! Caravan's client-node service.
