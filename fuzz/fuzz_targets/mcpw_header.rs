#![no_main]
// Placeholder: the target is written on its protocol branch.
libfuzzer_sys::fuzz_target!(|_data: &[u8]| {});
