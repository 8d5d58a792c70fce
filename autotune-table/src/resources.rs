//! What one compiled entry function uses, as ptxas reports it (`nvcc -Xptxas -v`);
//! parsed by the build library, recorded in tables.

use serde::{Deserialize, Serialize};

/// What one entry function uses, as ptxas reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub registers: u32,
    pub shared_bytes: u32,
    pub stack_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
}

impl Resources {
    pub fn spills(&self) -> bool {
        self.spill_store_bytes > 0 || self.spill_load_bytes > 0
    }
}
