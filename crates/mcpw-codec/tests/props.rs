//! Property tests: header fields round-trip bit-exactly for every value, and every message
//! decodes to itself from both forms, compressed and uncompressed.

use std::collections::BTreeMap;

use mcpw_codec::*;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::{Map, Value};

fn lax() -> Limits {
    let mut l = Limits::default();
    l.max_payload = u32::MAX;
    l.reserved = ReservedPolicy::Ignore;
    l
}

proptest! {
    #[test]
    fn header_fields_round_trip_bit_exact(
        kind: u8, flags: u16, seq: u64, method: u16, reserved: u16, size: u32,
    ) {
        let h = Header {
            version: VERSION,
            kind: MessageType(kind),
            flags: Flags(flags),
            seq,
            method: Method(method),
            reserved,
            size,
        };
        let bytes = h.to_bytes();
        prop_assert_eq!(&bytes[..4], b"MCPW");
        prop_assert_eq!(Header::parse(&bytes, &lax()), Ok(h));
        let mut buf = Vec::new();
        h.write(&mut buf);
        prop_assert_eq!(&buf[..], &bytes[..]);
        // Big-endian, field by field.
        prop_assert_eq!(&bytes[8..16], &seq.to_be_bytes()[..]);
        prop_assert_eq!(&bytes[20..24], &size.to_be_bytes()[..]);
    }

    #[test]
    fn any_24_bytes_parse_or_fail_without_panic(bytes: [u8; 24]) {
        let _ = Header::parse(&bytes, &Limits::default());
        if let Ok(h) = Header::parse(&bytes, &lax()) {
            prop_assert_eq!(h.to_bytes(), bytes);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------

fn s() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 ._:\u{e9}\"\\\\-]{0,12}"
}

/// Floats that print and parse exactly (k / 1024).
fn f() -> impl Strategy<Value = f64> {
    (-4096i32..4096).prop_map(|k| f64::from(k) / 1024.0)
}

/// A JSON value that is not null (an `Option<Value>` field holding null reads back as None).
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        s().prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map("[a-c]{1,3}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn strings() -> impl Strategy<Value = Vec<String>> {
    vec(s(), 0..4)
}

fn capability() -> impl Strategy<Value = Capability> {
    (
        s(),
        option::of(f()),
        option::of(strings()),
        option::of(strings()),
        option::of(strings()),
        option::of(s()),
        option::of(f()),
    )
        .prop_map(
            |(name, confidence, languages, specialties, patterns, ls, tp)| Capability {
                name,
                confidence,
                languages,
                specialties,
                patterns,
                learning_status: ls,
                training_progress: tp,
            },
        )
}

fn register() -> impl Strategy<Value = AgentRegister> {
    (
        s(),
        option::of(s()),
        vec(capability(), 0..3),
        option::of((option::of(s()), option::of(s()), option::of(s()))),
        option::of((
            option::of(any::<u64>()),
            option::of(any::<u64>()),
            option::of(any::<bool>()),
        )),
        option::of(json()),
    )
        .prop_map(
            |(agent_id, agent_type, capabilities, model, resources, metadata)| AgentRegister {
                agent_id,
                agent_type,
                capabilities,
                model: model.map(|(provider, name, version)| ModelInfo {
                    provider,
                    name,
                    version,
                }),
                resources: resources.map(|(a, b, c)| Resources {
                    max_concurrent_tasks: a,
                    max_memory_mb: b,
                    gpu_required: c,
                }),
                metadata,
            },
        )
}

fn confirmed() -> impl Strategy<Value = RegistrationConfirmed> {
    (
        s(),
        option::of(s()),
        option::of(any::<u64>()),
        option::of(strings()),
        option::of(s()),
        option::of(s()),
    )
        .prop_map(|(agent_id, session_id, hb, acc, status, server_time)| {
            RegistrationConfirmed {
                agent_id,
                session_id,
                heartbeat_interval_ms: hb,
                accepted_capabilities: acc,
                status,
                server_time,
            }
        })
}

fn heartbeat() -> impl Strategy<Value = AgentHeartbeat> {
    let metrics = (
        option::of(any::<u64>()),
        option::of(any::<u64>()),
        option::of(any::<u64>()),
        option::of(any::<u64>()),
        option::of(f()),
        option::of(any::<u64>()),
        option::of(any::<u64>()),
    )
        .prop_map(|(a, b, c, d, e, g, h)| HeartbeatMetrics {
            active_tasks: a,
            completed_tasks: b,
            failed_tasks: c,
            avg_task_duration_ms: d,
            cpu_usage_percent: e,
            memory_usage_mb: g,
            uptime_seconds: h,
        });
    let workload = (option::of(f()), option::of(any::<u64>()), option::of(f())).prop_map(
        |(current_load, queue_depth, processing_rate)| Workload {
            current_load,
            queue_depth,
            processing_rate,
        },
    );
    (
        s(),
        option::of(s()),
        option::of(metrics),
        option::of(workload),
    )
        .prop_map(|(agent_id, status, metrics, workload)| AgentHeartbeat {
            agent_id,
            status,
            metrics,
            workload,
        })
}

fn assigned() -> impl Strategy<Value = TaskAssigned> {
    let routing = (option::of(s()), option::of(f()), option::of(strings())).prop_map(
        |(assigned_by, score, alternative_agents)| RoutingMetadata {
            assigned_by,
            score,
            alternative_agents,
        },
    );
    (
        s(),
        option::of(s()),
        option::of(any::<u32>()),
        option::of(s()),
        option::of(json()),
        option::of(json()),
        option::of(routing),
    )
        .prop_map(
            |(task_id, task_type, priority, deadline, context, requirements, r)| TaskAssigned {
                task_id,
                task_type,
                priority,
                deadline,
                context,
                requirements,
                routing_metadata: r,
            },
        )
}

fn progress() -> impl Strategy<Value = TaskProgress> {
    (
        s(),
        s(),
        option::of(f()),
        option::of(s()),
        option::of(s()),
        option::of(strings()),
        option::of(s()),
        option::of(json()),
    )
        .prop_map(
            |(task_id, agent_id, progress, status, cs, sc, ec, ir)| TaskProgress {
                task_id,
                agent_id,
                progress,
                status,
                current_step: cs,
                steps_completed: sc,
                estimated_completion: ec,
                intermediate_results: ir,
                idempotency_key: None,
            },
        )
}

fn complete() -> impl Strategy<Value = TaskComplete> {
    let finding = (
        option::of(s()),
        option::of(s()),
        option::of(s()),
        option::of(any::<u64>()),
        option::of(s()),
        option::of(s()),
    )
        .prop_map(
            |(kind, severity, file, line, description, suggestion)| Finding {
                kind,
                severity,
                file,
                line,
                description,
                suggestion,
            },
        );
    let result = (
        option::of(s()),
        option::of(vec(finding, 0..3)),
        option::of(json()),
    )
        .prop_map(|(summary, findings, metrics)| TaskResult {
            summary,
            findings,
            metrics,
        });
    let usage = (
        option::of(f()),
        option::of(any::<u64>()),
        option::of(any::<u64>()),
    )
        .prop_map(|(cpu_seconds, memory_peak_mb, tokens_used)| ResourceUsage {
            cpu_seconds,
            memory_peak_mb,
            tokens_used,
        });
    (
        s(),
        s(),
        option::of(s()),
        option::of(any::<u64>()),
        option::of(result),
        option::of(usage),
    )
        .prop_map(
            |(task_id, agent_id, status, duration_ms, result, resource_usage)| TaskComplete {
                task_id,
                agent_id,
                status,
                duration_ms,
                result,
                resource_usage,
                idempotency_key: None,
            },
        )
}

fn capability_update() -> impl Strategy<Value = CapabilityUpdate> {
    let op = prop_oneof![
        Just(CapabilityOperation::Add),
        Just(CapabilityOperation::Update),
        Just(CapabilityOperation::Remove),
    ];
    (s(), op, capability(), option::of(s())).prop_map(
        |(agent_id, operation, capability, reason)| CapabilityUpdate {
            agent_id,
            operation,
            capability,
            reason,
            idempotency_key: None,
        },
    )
}

fn collaboration() -> impl Strategy<Value = CollaborationRequest> {
    (
        s(),
        s(),
        option::of(s()),
        strings(),
        option::of(s()),
        option::of(any::<u64>()),
        option::of(json()),
    )
        .prop_map(
            |(task_id, ra, ct, required_agents, cp, timeout_ms, context)| CollaborationRequest {
                task_id,
                requesting_agent: ra,
                collaboration_type: ct,
                required_agents,
                coordination_pattern: cp,
                timeout_ms,
                context,
                idempotency_key: None,
            },
        )
}

fn state_sync() -> impl Strategy<Value = StateSync> {
    let g = (s(), any::<u64>(), s()).prop_map(|(key, increment, actor)| {
        CrdtOperation::GCounter(GCounterOp {
            key,
            increment,
            actor,
        })
    });
    let or = (
        s(),
        prop_oneof![Just(SetOperation::Add), Just(SetOperation::Remove)],
        s(),
        option::of(s()),
        option::of(strings()),
    )
        .prop_map(|(key, operation, element, unique_id, removed_ids)| {
            CrdtOperation::OrSet(OrSetOp {
                key,
                operation,
                element,
                unique_id,
                removed_ids,
            })
        });
    (
        s(),
        btree_map(s(), any::<u64>(), 0..4),
        vec(prop_oneof![g, or], 0..4),
        option::of("[0-9a-f]{40}"),
    )
        .prop_map(
            |(agent_id, vector_clock, operations, merkle_root)| StateSync {
                agent_id,
                vector_clock: vector_clock.into_iter().collect::<BTreeMap<_, _>>(),
                operations,
                merkle_root,
            },
        )
}

fn shutdown() -> impl Strategy<Value = AgentShutdown> {
    let fs = (
        option::of(any::<u64>()),
        option::of(strings()),
        option::of(strings()),
    )
        .prop_map(
            |(completed_tasks, active_tasks, pending_transfers)| FinalState {
                completed_tasks,
                active_tasks,
                pending_transfers,
            },
        );
    (
        s(),
        option::of(s()),
        option::of(any::<u64>()),
        option::of(any::<bool>()),
        option::of(fs),
    )
        .prop_map(|(agent_id, reason, gt, tt, final_state)| AgentShutdown {
            agent_id,
            reason,
            graceful_timeout_ms: gt,
            transfer_tasks: tt,
            final_state,
        })
}

/// Other methods: reference names (codes 1-9), names without a code (code 0 in binary),
/// and no name.
fn other() -> impl Strategy<Value = OtherCall> {
    let name = prop_oneof![
        Just("initialize".to_owned()),
        Just("tool.execute".to_owned()),
        Just("pong".to_owned()),
        "custom\\.[a-z]{1,8}",
        Just(String::new()),
    ];
    let params = prop_oneof![Just(Value::Null), json()];
    (name, params).prop_map(|(m, p)| OtherCall::new(m, p))
}

/// Every non-batch body.
fn call_body() -> impl Strategy<Value = Body> {
    prop_oneof![
        register().prop_map(Body::AgentRegister),
        confirmed().prop_map(Body::RegistrationConfirmed),
        heartbeat().prop_map(Body::AgentHeartbeat),
        assigned().prop_map(Body::TaskAssigned),
        progress().prop_map(Body::TaskProgress),
        complete().prop_map(Body::TaskComplete),
        capability_update().prop_map(Body::CapabilityUpdate),
        collaboration().prop_map(Body::CollaborationRequest),
        state_sync().prop_map(Body::StateSync),
        shutdown().prop_map(Body::AgentShutdown),
        other().prop_map(Body::Other),
        (any::<i32>(), s(), option::of(json())).prop_map(|(c, m, d)| Body::Error(ErrorBody {
            code: ErrorCode(c),
            message: m,
            data: d,
        })),
    ]
}

fn kind_for(body: &Body, k: u8) -> MessageType {
    match body {
        Body::Error(_) => MessageType::ERROR,
        Body::Batch(_) => MessageType::BATCH,
        _ if k == 3 || k == 6 => MessageType::REQUEST,
        _ => MessageType(k),
    }
}

/// A message in the JSON form's terms (id, no seq, no flags).
fn json_message() -> impl Strategy<Value = Message> {
    (option::of(s()), any::<u8>(), call_body()).prop_map(|(id, k, body)| Message {
        id,
        seq: 0,
        kind: kind_for(&body, k),
        flags: Flags::NONE,
        body,
    })
}

/// Any message (batches included) in the binary form's terms (seq and flags, no id).
fn binary_message() -> impl Strategy<Value = Message> {
    let framing = Flags::COMPRESSED | Flags::BATCH | Flags::ENCRYPTED;
    let body = prop_oneof![
        4 => call_body(),
        1 => vec(json_message(), 0..4).prop_map(Body::Batch),
    ];
    (any::<u64>(), any::<u16>(), any::<u8>(), body).prop_map(move |(seq, flags, k, body)| Message {
        id: None,
        seq,
        kind: kind_for(&body, k),
        flags: Flags(flags).without(framing),
        body,
    })
}

fn codec(compress: bool) -> Codec {
    let mut config = CodecConfig::default();
    if compress {
        config.compression.threshold = 0;
    } else {
        config.compression.policy = CompressPolicy::Never;
    }
    Codec::new(config)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn binary_decode_encode_is_identity(msg in binary_message(), compress: bool) {
        let mut c = codec(compress);
        let mut frame = Vec::new();
        let header = c.encode(&msg, &mut frame).unwrap();
        prop_assert_eq!(header.size as usize, frame.len() - HEADER_LEN);
        if !compress {
            prop_assert!(!header.flags.contains(Flags::COMPRESSED));
        }
        prop_assert_eq!(c.decode(&frame).unwrap(), msg);
    }

    #[test]
    fn json_decode_encode_is_identity(msg in json_message()) {
        let mut text = Vec::new();
        json::encode(&msg, &mut text).unwrap();
        prop_assert_eq!(json::decode(&text, &Limits::default()).unwrap(), msg);
    }

    #[test]
    fn json_batches_round_trip(msgs in vec(json_message(), 0..5), id in option::of(s())) {
        let msg = Message { id, ..Message::batch(msgs) };
        let mut text = Vec::new();
        json::encode(&msg, &mut text).unwrap();
        prop_assert_eq!(json::decode(&text, &Limits::default()).unwrap(), msg);
    }

    #[test]
    fn unknown_method_codes_survive_the_binary_form(
        code in 20u16.., params in json(), seq: u64,
    ) {
        let msg = Message::new(
            MessageType::REQUEST,
            Body::Other(OtherCall { method: String::new(), code: Method(code), params }),
        )
        .with_seq(seq);
        let mut c = Codec::default();
        let mut frame = Vec::new();
        c.encode(&msg, &mut frame).unwrap();
        prop_assert_eq!(c.decode(&frame).unwrap(), msg);
    }

    #[test]
    fn one_codec_serves_many_frames_with_reused_state(
        msgs in vec(binary_message(), 1..8),
    ) {
        let mut c = codec(true);
        let mut frame = Vec::new();
        for m in &msgs {
            frame.clear();
            c.encode(m, &mut frame).unwrap();
            prop_assert_eq!(&c.decode(&frame).unwrap(), m);
        }
    }
}
