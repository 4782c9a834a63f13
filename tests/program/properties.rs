use crate::harness::*;
