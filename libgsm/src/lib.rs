//! Gossamer runtime (`gossamer`). Empty until the runtime-core issue lands.
