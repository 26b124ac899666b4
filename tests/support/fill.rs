//! One instance per (message, variant) with every field set, built from our descriptors by
//! a fixed rule; `tests/python/wire_check.py` builds the twin instances on the Python side.
//! Shared by the cross-language wire check and the file-format round trips.
#![allow(dead_code)]

use prost::Message;
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, ReflectMessage, Value,
};
use xds_sansio::pb;

pub const VARIANTS: u32 = 4;
pub const MAX_DEPTH: u32 = 3;
pub const OUR_PACKAGES: &[&str] = &[
    "envoy.service.discovery.v3",
    "envoy.config.core.v3",
    "envoy.type.v3",
    "xds.core.v3",
    "google.rpc",
];

pub fn scalar(field: &FieldDescriptor, variant: u32, index: u32) -> Value {
    let n = field.number();
    let (n, v, i) = (i64::from(n), i64::from(variant), i64::from(index));
    match field.kind() {
        Kind::String => Value::String(format!("{}-{variant}-{index}", field.name())),
        Kind::Bytes => Value::Bytes(
            format!("{}:{variant}:{index}", field.name())
                .into_bytes()
                .into(),
        ),
        Kind::Bool => Value::Bool(true),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(-(100 * n + v + i) as i32),
        Kind::Uint32 | Kind::Fixed32 => Value::U32((100 * n + v + i) as u32),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(-(1 << 40) - n - v - i),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(((1 << 40) + n + v + i) as u64),
        Kind::Double => Value::F64(n as f64 + 0.5),
        Kind::Float => Value::F32(n as f32 + 0.5),
        Kind::Enum(e) => Value::EnumNumber(e.values().last().expect("enum values").number()),
        Kind::Message(m) => panic!("{} is not a scalar", m.full_name()),
    }
}

pub fn well_known(
    desc: &MessageDescriptor,
    field: &FieldDescriptor,
    variant: u32,
) -> DynamicMessage {
    use prost_types::value::Kind as V;
    let encoded = match desc.full_name() {
        "google.protobuf.Any" => {
            pb::google::protobuf::Any::from_msg(&pb::envoy::config::core::v3::ControlPlane {
                identifier: format!("any-{}-{variant}", field.name()),
            })
            .encode_to_vec()
        }
        "google.protobuf.Struct" => {
            let value = |kind| prost_types::Value { kind: Some(kind) };
            let mut fields = std::collections::BTreeMap::new();
            fields.insert(
                "s".into(),
                value(V::StringValue(format!("{}-{variant}", field.name()))),
            );
            fields.insert("n".into(), value(V::NumberValue(1.5)));
            fields.insert("b".into(), value(V::BoolValue(true)));
            fields.insert(
                "l".into(),
                value(V::ListValue(prost_types::ListValue {
                    values: vec![
                        value(V::StringValue("x".into())),
                        value(V::NumberValue(2.0)),
                    ],
                })),
            );
            let mut inner = std::collections::BTreeMap::new();
            inner.insert("k".into(), value(V::NullValue(0)));
            fields.insert(
                "o".into(),
                value(V::StructValue(prost_types::Struct { fields: inner })),
            );
            prost_types::Struct { fields }.encode_to_vec()
        }
        "google.protobuf.Duration" => prost_types::Duration {
            seconds: i64::from(field.number() + variant),
            nanos: 500_000_000,
        }
        .encode_to_vec(),
        other => panic!("unhandled well-known type {other}"),
    };
    DynamicMessage::decode(desc.clone(), encoded.as_slice()).expect("well-known type")
}

pub fn child(desc: &MessageDescriptor, field: &FieldDescriptor, variant: u32, depth: u32) -> Value {
    if desc.package_name() == "google.protobuf" {
        Value::Message(well_known(desc, field, variant))
    } else {
        let mut msg = DynamicMessage::new(desc.clone());
        fill(&mut msg, variant, depth + 1);
        Value::Message(msg)
    }
}

/// Sets every field of `msg`, one member per oneof chosen by `variant`: the twin of
/// `fill` in wire_check.py.
pub fn fill(msg: &mut DynamicMessage, variant: u32, depth: u32) {
    let desc = msg.descriptor();
    let chosen: Vec<String> = desc
        .oneofs()
        .map(|o| {
            let fields: Vec<_> = o.fields().collect();
            fields[variant as usize % fields.len()].name().to_string()
        })
        .collect();
    let mut fields: Vec<_> = desc.fields().collect();
    fields.sort_by_key(|f| f.number());
    for field in fields {
        if field.containing_oneof().is_some() && !chosen.contains(&field.name().to_string()) {
            continue;
        }
        let value = if field.is_map() {
            let Kind::Message(entry) = field.kind() else {
                unreachable!()
            };
            let (key_field, value_field) =
                (entry.map_entry_key_field(), entry.map_entry_value_field());
            let map = (0..2)
                .map(|i| {
                    let key = match key_field.kind() {
                        Kind::String => MapKey::String(format!("k{i}")),
                        other => panic!("unhandled map key {other:?}"),
                    };
                    let value = match value_field.kind() {
                        Kind::Message(m) => child(&m, &value_field, variant, depth),
                        _ => scalar(&value_field, variant, i),
                    };
                    (key, value)
                })
                .collect();
            Value::Map(map)
        } else if let Kind::Message(m) = field.kind() {
            if depth >= MAX_DEPTH {
                continue;
            }
            if field.is_list() {
                Value::List((0..2).map(|_| child(&m, &field, variant, depth)).collect())
            } else {
                child(&m, &field, variant, depth)
            }
        } else if field.is_list() {
            Value::List((0..2).map(|i| scalar(&field, variant, i)).collect())
        } else {
            scalar(&field, variant, 0)
        };
        msg.set_field(&field, value);
    }
}
