#![no_std]
#![warn(missing_docs)]
//! xds-sansio
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod pb;
pub mod resource;
pub mod time;
pub mod types;
