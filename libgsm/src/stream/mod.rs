//! Streams (to come).
