#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| jsonrpc_bus_proto::fuzzing::bus(data));
