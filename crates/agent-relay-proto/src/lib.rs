//! Sans-IO External Agent Protocol (mvp-0.2) relay (in progress).
#![forbid(unsafe_code)]
#![deny(missing_docs)]
