#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_relay_proto::fuzzing::host(data));
