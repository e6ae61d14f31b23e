use super::*;

#[test]
fn canonical_json_sorts_keys_at_every_level() {
    let v = serde_json::json!({"b": 1, "a": {"z": [1, {"y": 2, "x": 3}], "c": "s"}});
    assert_eq!(canonical_json(&v), r#"{"a":{"c":"s","z":[1,{"x":3,"y":2}]},"b":1}"#);
    // Known FNV-1a vectors.
    assert_eq!(seeded::fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(seeded::fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
}

#[test]
fn window_labels() {
    assert_eq!(window_label(Some(32_000)), "32k");
    assert_eq!(window_label(Some(1_000_000)), "1m");
    assert_eq!(window_label(Some(50_500)), "50500");
    assert_eq!(window_label(None), "own");
}
