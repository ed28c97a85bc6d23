//! Shared helpers for the whole-system tests.
