//! Fleet simulator.
