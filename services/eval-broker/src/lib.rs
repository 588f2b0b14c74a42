//! Caravan's eval-broker service.
