//! End-to-end and in-process tests of MCJS.
