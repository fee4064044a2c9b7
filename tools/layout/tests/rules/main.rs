//! check-layout's rules over small workspaces written for each case: every way a breach hid from
//! the old text-matching script must be reported, and clean code must not be.

mod cycles;
mod ffi;
mod fixture;
mod size;
