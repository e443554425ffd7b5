//! Integration tests for floe-auth. One binary (with modules) rather than a
//! binary per file: each test binary is a separate link on a 2-core machine.

mod common;
mod fetch;
mod hs256;
mod jwks;
mod rotation;
mod secret_file;
