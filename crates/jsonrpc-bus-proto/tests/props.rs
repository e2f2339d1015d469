//! proptest: every message type round-trips through encode and decode.

use jsonrpc_bus_proto::codec::{
    classify, split_body, write_call_raw, write_error, write_result, Body, Incoming,
};
use jsonrpc_bus_proto::message::{
    ClientInfo, InitializeParams, InitializeResult, PingResult, SendMessageResult, SubscribeResult,
    TopicParams,
};
use jsonrpc_bus_proto::message::{Id, Request, Response};
use jsonrpc_bus_proto::{ErrorCode, ErrorObject};
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

fn id() -> impl Strategy<Value = Id> {
    prop_oneof![
        Just(Id::Null),
        any::<u64>().prop_map(Id::from),
        any::<i64>().prop_map(|n| Id::Number(n.into())),
        ".{0,20}".prop_map(Id::Str),
    ]
}

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,16}"
}

fn round<T: Serialize + DeserializeOwned + PartialEq + Debug>(v: &T) {
    let s = serde_json::to_string(v).unwrap();
    let back: T = serde_json::from_str(&s).unwrap();
    assert_eq!(&back, v, "{s}");
}

proptest! {
    #[test]
    fn requests_round_trip_and_classify(id in id(), topic in text()) {
        let req = Request::new(id.clone(), "subscribe", TopicParams { topic: topic.clone() });
        round(&req);
        let s = serde_json::to_string(&req).unwrap();
        let Body::Single(raw) = split_body(s.as_bytes(), 1 << 20, 10).unwrap() else { panic!() };
        let Incoming::Call(call) = classify(raw).unwrap() else { panic!() };
        prop_assert_eq!(call.id, Some(id));
        prop_assert_eq!(call.method, "subscribe");
    }

    #[test]
    fn writers_decode_back(id in id(), code in any::<i32>(), msg in text(), stop in any::<bool>()) {
        let mut out = Vec::new();
        write_result(&mut out, &id, &SendMessageResult::answer(stop));
        let r: Response<SendMessageResult> = serde_json::from_slice(&out).unwrap();
        prop_assert_eq!(r, Response::result(id.clone(), SendMessageResult::answer(stop)));

        out.clear();
        let err = ErrorObject { code: ErrorCode(code), message: msg, data: None };
        write_error(&mut out, &id, &err);
        let r: Response<serde_json::Value> = serde_json::from_slice(&out).unwrap();
        prop_assert_eq!(r, Response::error(id.clone(), err));

        out.clear();
        write_call_raw(&mut out, Some(&id), "ping", b"{}");
        let r: Request<serde_json::Value> = serde_json::from_slice(&out).unwrap();
        prop_assert_eq!(r.id, id);
    }

    #[test]
    fn params_and_results_round_trip(
        a in proptest::option::of(text()),
        b in proptest::option::of(text()),
        c in text(),
        n in proptest::option::of(any::<u32>()),
        stop in any::<bool>(),
    ) {
        round(&InitializeParams { client_id: a.clone(), client_info: Some(ClientInfo { name: a.clone(), version: b.clone() }) });
        round(&InitializeParams { client_id: a.clone(), client_info: None });
        round(&SubscribeResult { success: stop, subscription_id: b.clone() });
        round(&PingResult { timestamp: c.clone() });
        round(&SendMessageResult { success: true, stop_propagation: stop, delivered: n, errors: n, timeouts: None, disconnected: n, overloaded: None });
        let init = InitializeResult {
            server_id: c.clone(),
            server_info: jsonrpc_bus_proto::message::ServerInfo { name: c.clone(), version: c.clone() },
            capabilities: jsonrpc_bus_proto::message::Capabilities { subscribe: stop, publish: !stop, topics: vec![c] },
        };
        round(&init);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(body) = split_body(&bytes, 1 << 20, 10) {
            match body {
                Body::Single(raw) => { let _ = classify(raw); }
                Body::Batch(entries) => for e in entries { let _ = classify(e.get()); },
            }
        }
    }
}
