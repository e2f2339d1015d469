#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| chopsticks_proto::fuzzing::controller(data));
