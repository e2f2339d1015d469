#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| llmrtc_webrtc::fuzzing::offer(data));
