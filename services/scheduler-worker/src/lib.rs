//! Caravan's scheduler-worker service.
