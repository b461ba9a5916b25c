//! Reading JSON objects the way Go's `encoding/json` fills a struct, where clients rely on it.
//!
//! Go matches an object's keys to a struct's fields without regard to case (`{"BATCH":2}`
//! sets `batch`), and a key given twice keeps its last value. serde matches keys exactly and
//! refuses duplicates, so bodies that nats-server accepts would be refused or half read.
//! [`fold_keys`] renames keys to the field names they fold to before serde sees them;
//! [`from_value`] does it for every struct nested in a value, as Go does for nested structs,
//! while a map's keys (`metadata`) stay as written.

use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Renames each key of `object` that equals one of `fields` ignoring ASCII case to that field
/// name, as Go's decoder matches them (it folds Unicode too; only ASCII is folded here).
/// When a field is given both exactly and in another case, the exact spelling wins (Go takes
/// the later one in the text, which a parsed map no longer knows). Other keys are kept as
/// they are (unknown fields are for the caller's serde rules). O(keys × fields).
pub(crate) fn fold_keys(object: Map<String, Value>, fields: &[&str]) -> Map<String, Value> {
    let mut out = Map::with_capacity(object.len());
    let mut folded = Vec::new();
    for (key, value) in object {
        match fields
            .iter()
            .find(|f| f.eq_ignore_ascii_case(&key) && **f != key)
        {
            Some(field) => folded.push(((*field).to_owned(), value)),
            None => {
                out.insert(key, value);
            }
        }
    }
    for (field, value) in folded {
        out.entry(field).or_insert(value);
    }
    out
}

/// Deserializes `T` from `value` with Go's field matching at every level: the keys of each
/// JSON object that serde reads as a struct are folded ([`fold_keys`]) to that struct's field
/// names; objects read as maps keep their keys. Errors are serde_json's, as from
/// [`serde_json::from_value`].
pub(crate) fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, serde_json::Error> {
    T::deserialize(GoValue(value))
}

/// A [`Value`] whose structs, at any depth, are read with [`fold_keys`].
struct GoValue(Value);

/// Forwards deserializer methods to the wrapped [`Value`] (scalars: nothing nested to fold).
macro_rules! forward_to_value {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, serde_json::Error> {
            self.0.$method(visitor)
        }
    )*};
}

impl<'de> Deserializer<'de> for GoValue {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(GoSeq(items.into_iter())),
            Value::Object(map) => visitor.visit_map(GoMap::new(map)),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(GoValue(other)),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(map) => visitor.visit_map(GoMap::new(fold_keys(map, fields))),
            other => other.deserialize_struct(name, fields, visitor),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(GoSeq(items.into_iter())),
            other => other.deserialize_seq(visitor),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(map) => visitor.visit_map(GoMap::new(map)),
            other => other.deserialize_map(visitor),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_tuple(len, visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_tuple_struct(name, len, visitor)
    }

    forward_to_value!(
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_unit,
        deserialize_identifier,
        deserialize_ignored_any,
    );
}

/// The elements of an array, each a [`GoValue`].
struct GoSeq(std::vec::IntoIter<Value>);

impl<'de> SeqAccess<'de> for GoSeq {
    type Error = serde_json::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        self.0
            .next()
            .map(|v| seed.deserialize(GoValue(v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// The members of an object: keys as written, values as [`GoValue`]s.
struct GoMap {
    members: serde_json::map::IntoIter,
    value: Option<Value>,
}

impl GoMap {
    fn new(map: Map<String, Value>) -> Self {
        Self {
            members: map.into_iter(),
            value: None,
        }
    }
}

impl<'de> MapAccess<'de> for GoMap {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        match self.members.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(Value::String(key)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(GoValue(value)),
            None => Err(serde::de::Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.members.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("an object"),
        }
    }

    #[test]
    fn keys_fold_to_field_names_and_exact_spellings_win() {
        let fields = ["batch", "no_wait"];
        let got = fold_keys(
            object(json!({"BATCH": 2, "No_Wait": true, "other": 1})),
            &fields,
        );
        assert_eq!(
            Value::Object(got),
            json!({"batch": 2, "no_wait": true, "other": 1})
        );
        let got = fold_keys(object(json!({"Batch": 2, "batch": 3})), &fields);
        assert_eq!(Value::Object(got), json!({"batch": 3}));
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        max_msgs: i64,
        #[serde(default)]
        sources: Vec<Inner>,
        #[serde(default)]
        mirror: Option<Inner>,
        #[serde(default)]
        metadata: std::collections::BTreeMap<String, String>,
        #[serde(default)]
        raw: Option<Value>,
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        name: String,
        #[serde(default)]
        filter_subject: Option<String>,
    }

    #[test]
    fn nested_struct_keys_fold_and_map_keys_do_not() {
        let got: Outer = from_value(json!({
            "MAX_MSGS": 5,
            "Sources": [{"NAME": "A", "Filter_Subject": "a.>"}, {"name": "B"}],
            "Mirror": {"Name": "M"},
            "Metadata": {"Owner": "x", "owner": "y"},
            "Raw": {"Kept": 1},
        }))
        .expect("folds");
        assert_eq!(got.max_msgs, 5);
        assert_eq!(got.sources[0].name, "A");
        assert_eq!(got.sources[0].filter_subject.as_deref(), Some("a.>"));
        assert_eq!(got.sources[1].name, "B");
        assert_eq!(got.mirror.expect("mirror").name, "M");
        assert_eq!(
            got.metadata.into_iter().collect::<Vec<_>>(),
            [("Owner".into(), "x".into()), ("owner".into(), "y".into())]
        );
        assert_eq!(got.raw, Some(json!({"Kept": 1})));
    }

    #[test]
    fn unknown_and_mistyped_fields_are_still_refused() {
        let err = from_value::<Outer>(json!({"max_msgs": 1, "Bogus": 1})).expect_err("unknown");
        assert!(err.to_string().contains("unknown field `Bogus`"), "{err}");
        let err = from_value::<Outer>(json!({"max_msgs": "1"})).expect_err("type");
        assert!(err.to_string().contains("invalid type"), "{err}");
        let err = from_value::<Outer>(json!({"max_msgs": 1, "mirror": {"NAME": 1}}))
            .expect_err("nested type");
        assert!(err.to_string().contains("invalid type"), "{err}");
    }
}
