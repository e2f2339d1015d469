#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpw_codec::fuzzing::agent(data));
