//! simulator
