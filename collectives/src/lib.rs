//! Collective operations for Gossamer teams.
//!
//! Nothing is implemented yet: barrier, broadcast, reductions and exchanges arrive with the
//! collectives issue, built on the runtime's fabrics rather than on MPI. This crate is a member of
//! the workspace now so that the layout of `shared/DESIGN.md` §1 holds from the start.
