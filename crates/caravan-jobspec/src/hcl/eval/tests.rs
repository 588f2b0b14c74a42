//! Evaluator tests.
