//! gzip interop both ways with independent implementations: the `gzip` command and
//! Python's `gzip` module (which wraps zlib). Each tool that is installed is used; with
//! neither, the tests print why they skipped, and fail under `CI=true`.

use std::io::Write;
use std::process::{Command, Stdio};

use mcpw_codec::gzip::{GzipDecoder, GzipEncoder};
use mcpw_codec::{Backend, Body, Codec, Flags, Header, Message, MessageType, Method, OtherCall};

fn backends() -> Vec<Backend> {
    vec![
        Backend::MinizOxide,
        #[cfg(feature = "zlib-rs")]
        Backend::ZlibRs,
    ]
}

/// Runs `cmd args` with `input` on stdin; `None` if the program is not installed.
fn run(cmd: &str, args: &[&str], input: &[u8]) -> Option<Vec<u8>> {
    let mut child = match Command::new(cmd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("{cmd}: {e}"),
    };
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer").expect("write stdin");
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(out.stdout)
}

const PY_COMPRESS: &str = "import gzip,sys; sys.stdout.buffer.write(gzip.compress(sys.stdin.buffer.read(), compresslevel=int(sys.argv[1])))";
const PY_COMPRESS_NAMED: &str = "import gzip,io,sys\nb=io.BytesIO()\nwith gzip.GzipFile(filename='payload.json', mode='wb', fileobj=b, mtime=1700000000) as f: f.write(sys.stdin.buffer.read())\nsys.stdout.buffer.write(b.getvalue())";
const PY_DECOMPRESS: &str =
    "import gzip,sys; sys.stdout.buffer.write(gzip.decompress(sys.stdin.buffer.read()))";

/// Outside compressors: (name, program, args), python ones with their script.
fn compressors() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    vec![
        ("gzip -1", "gzip", vec!["-c", "-n", "-1"]),
        ("gzip -9", "gzip", vec!["-c", "-9"]),
        ("python level 6", "python3", vec!["-c", PY_COMPRESS, "6"]),
        (
            "python with FNAME and MTIME",
            "python3",
            vec!["-c", PY_COMPRESS_NAMED],
        ),
    ]
}

fn decompressors() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    vec![
        ("gzip -d", "gzip", vec!["-d", "-c"]),
        ("python", "python3", vec!["-c", PY_DECOMPRESS]),
    ]
}

fn payloads() -> Vec<Vec<u8>> {
    let json = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/task_complete.json"
    ))
    .expect("fixture");
    let mut big = Vec::new();
    for i in 0..400 {
        big.extend_from_slice(format!("{{\"i\":{i},\"text\":\"finding number {i}\"}},").as_bytes());
    }
    vec![Vec::new(), b"x".to_vec(), json, big, vec![0u8; 300_000]]
}

/// Reports tools that are missing; fails under CI=true if none ran.
fn require_some(ran: usize, what: &str) {
    if ran == 0 {
        let msg = format!("skipped {what}: neither `gzip` nor `python3` is installed");
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{msg} (CI=true)"
        );
        eprintln!("{msg}");
    }
}

#[test]
fn our_gzip_is_read_by_gzip_and_python() {
    let mut ran = 0;
    for backend in backends() {
        for level in [1, 6, 9] {
            let mut enc = GzipEncoder::new(backend, level);
            for data in payloads() {
                let mut z = Vec::new();
                enc.compress(&data, &mut z);
                for (name, cmd, args) in decompressors() {
                    let Some(out) = run(cmd, &args, &z) else {
                        eprintln!("{cmd} not installed: {name} skipped");
                        continue;
                    };
                    ran += 1;
                    assert_eq!(out, data, "{name} on {backend:?} level {level}");
                }
            }
        }
    }
    require_some(ran, "our_gzip_is_read_by_gzip_and_python");
}

#[test]
fn gzip_and_python_output_is_read_by_us() {
    let mut ran = 0;
    for data in payloads() {
        for (name, cmd, args) in compressors() {
            let Some(z) = run(cmd, &args, &data) else {
                eprintln!("{cmd} not installed: {name} skipped");
                continue;
            };
            ran += 1;
            for backend in backends() {
                let mut out = Vec::new();
                GzipDecoder::new(backend)
                    .decompress(&z, &mut out, data.len())
                    .unwrap_or_else(|e| panic!("{name} on {backend:?}: {e}"));
                assert_eq!(out, data, "{name} on {backend:?}");
            }
        }
    }
    require_some(ran, "gzip_and_python_output_is_read_by_us");
}

/// A frame whose payload an outside tool compressed, as a Go peer would send it.
#[test]
fn frames_compressed_elsewhere_decode_and_ours_inflate_elsewhere() {
    let params =
        serde_json::json!({"rows": (0..300).map(|i| format!("row {i}")).collect::<Vec<_>>()});
    let payload = serde_json::to_vec(&params).unwrap();
    let mut ran = 0;
    for (name, cmd, args) in compressors() {
        let Some(z) = run(cmd, &args, &payload) else {
            continue;
        };
        ran += 1;
        let mut h = Header::new(MessageType::REQUEST, 9, Method::TOOL_EXECUTE);
        h.flags = Flags::COMPRESSED;
        h.size = z.len() as u32;
        let mut frame = h.to_bytes().to_vec();
        frame.extend_from_slice(&z);
        let msg = Codec::default()
            .decode(&frame)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            msg.body,
            Body::Other(OtherCall::new("tool.execute", params.clone())),
            "{name}"
        );
    }
    // And the other way: our compressed frame's payload, inflated by an outside tool.
    let msg = Message::new(
        MessageType::REQUEST,
        Body::Other(OtherCall::new("tool.execute", params.clone())),
    );
    let mut frame = Vec::new();
    let h = Codec::default().encode(&msg, &mut frame).unwrap();
    assert!(
        h.flags.contains(Flags::COMPRESSED),
        "a 3 KB list compresses"
    );
    for (_, cmd, args) in decompressors() {
        if let Some(out) = run(cmd, &args, &frame[24..]) {
            ran += 1;
            assert_eq!(out, payload);
        }
    }
    require_some(
        ran,
        "frames_compressed_elsewhere_decode_and_ours_inflate_elsewhere",
    );
}
