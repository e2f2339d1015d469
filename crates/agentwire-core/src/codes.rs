//! `open_codes!` and `string_id!`: the macros behind every open code space and string id.
//!
//! Both expand in the calling crate; an expansion that asks for serde impls (the `serde`
//! option) names `::serde`, so the calling crate depends on serde itself.

/// Defines an open code space: a newtype over an integer (or a `'static` string) with named
/// constants, so a value this crate does not know survives a decode and re-encode unchanged.
///
/// # Integer codes
///
/// ```
/// agentwire_core::open_codes! {
///     /// A JSON-RPC error code.
///     pub struct ErrorCode(i32) [with_value, known], text fn message;
///     /// -32700: not JSON.
///     PARSE_ERROR = -32700, "Parse error";
///     /// -32000 (ours): no text.
///     NOT_INITIALIZED = -32000;
/// }
///
/// assert_eq!(ErrorCode::PARSE_ERROR.name(), Some("PARSE_ERROR"));
/// assert_eq!(ErrorCode::PARSE_ERROR.message(), Some("Parse error"));
/// assert_eq!(ErrorCode::NOT_INITIALIZED.message(), None);
/// assert_eq!(format!("{:?}", ErrorCode::PARSE_ERROR), "PARSE_ERROR(-32700)");
/// assert_eq!(format!("{:?}", ErrorCode(7)), "ErrorCode(7)");
/// assert_eq!(ErrorCode::from(7).to_string(), "7");
/// assert_eq!(ErrorCode::KNOWN, &[ErrorCode::PARSE_ERROR, ErrorCode::NOT_INITIALIZED]);
/// assert_eq!(i32::from(ErrorCode::PARSE_ERROR), -32700);
/// ```
///
/// The struct is `pub struct $ty(pub $int)` deriving `Clone, Copy, PartialEq, Eq, PartialOrd,
/// Ord, Hash` (attributes written above it, such as docs or `#[derive(Default)]`, are kept).
/// Generated: one associated const per named value, `name(self) -> Option<&'static str>`
/// (the constant's name), `Debug` (the bare name for a named value, `Type(value)` for
/// others), `Display` (the number), `From<$int>` and `From<$ty> for $int`.
///
/// Options, in the brackets after the struct (any order, all optional):
/// - `with_value`: `Debug` prints a named value as `NAME(value)` (`POLICY(1008)`).
/// - `known`: `pub const KNOWN: &'static [Self]`, every named value in declaration order.
/// - `serde`: transparent `Serialize`/`Deserialize` as the integer (needs serde in the
///   calling crate).
///
/// After the brackets, `, text fn NAME` adds `NAME(self) -> Option<&'static str>` returning
/// the text written after a constant's value (`= -32700, "Parse error"`), `None` for a value
/// without one.
///
/// # String codes
///
/// ```
/// agentwire_core::open_codes! {
///     /// The `code` of an `error` message.
///     pub struct ErrorCode(str);
///     /// Malformed message.
///     INVALID_MESSAGE;
///     /// Unexpected server error.
///     INTERNAL_ERROR;
/// }
///
/// assert_eq!(ErrorCode::new("INTERNAL_ERROR"), ErrorCode::INTERNAL_ERROR);
/// assert_eq!(ErrorCode::INVALID_MESSAGE.as_str(), "INVALID_MESSAGE");
/// assert!(!ErrorCode::new("OTHER").is_known());
/// assert_eq!(format!("{:?}", ErrorCode::INTERNAL_ERROR), "INTERNAL_ERROR");
/// assert_eq!(format!("{:?}", ErrorCode::new("OTHER")), r#"ErrorCode("OTHER")"#);
/// assert_eq!(ErrorCode::KNOWN.len(), 2);
/// ```
///
/// `$ty(str)` makes `$ty` a `Clone` newtype over `Cow<'static, str>` (private field) whose
/// constants are their own names. Generated: the constants, `KNOWN` (every named code in
/// declaration order), `new(impl Into<Cow<'static, str>>)` (a known code borrows its
/// constant), `as_str`, `is_known`, `PartialEq`/`Eq`/`Hash` by text, `Debug` (the bare name
/// when known, `Type("text")` otherwise), `Display` (the text). The only option is `serde`
/// (a JSON string).
#[macro_export]
macro_rules! open_codes {
    // ---- internal rules ----
    (@opts $ty:ident $int:ty [$($name:ident)*]) => {};
    (@opts $ty:ident $int:ty [$($name:ident)*] serde $($rest:ident)*) => {
        impl ::serde::Serialize for $ty {
            fn serialize<S: ::serde::Serializer>(
                &self,
                s: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                ::serde::Serialize::serialize(&self.0, s)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                d: D,
            ) -> ::core::result::Result<Self, D::Error> {
                <$int as ::serde::Deserialize<'de>>::deserialize(d).map(Self)
            }
        }

        $crate::open_codes!(@opts $ty $int [$($name)*] $($rest)*);
    };
    (@opts $ty:ident $int:ty [$($name:ident)*] known $($rest:ident)*) => {
        #[allow(dead_code, unreachable_pub)]
        impl $ty {
            /// Every named value, in declaration order.
            pub const KNOWN: &'static [Self] = &[$(Self::$name),*];
        }

        $crate::open_codes!(@opts $ty $int [$($name)*] $($rest)*);
    };
    (@opts $ty:ident $int:ty [$($name:ident)*] with_value $($rest:ident)*) => {
        $crate::open_codes!(@opts $ty $int [$($name)*] $($rest)*);
    };
    (@is with_value, with_value) => { true };
    (@is $want:ident, $opt:ident) => { false };
    (@text_fn [] $ty:ident { $($val:literal $(, $text:literal)?;)* }) => {};
    (@text_fn [$f:ident] $ty:ident { $($val:literal $(, $text:literal)?;)* }) => {
        #[allow(dead_code, unreachable_pub)]
        impl $ty {
            /// The text written for this value where it is a named value with one.
            #[allow(unreachable_patterns)]
            pub fn $f(self) -> ::core::option::Option<&'static str> {
                match self.0 {
                    $($val => $crate::open_codes!(@some $($text)?),)*
                    _ => ::core::option::Option::None,
                }
            }
        }
    };
    (@some) => { ::core::option::Option::None };
    (@some $text:literal) => { ::core::option::Option::Some($text) };
    // Serialize as the text, deserialize a string through `new` (also used by `string_id!`).
    (@str_opt $ty:ident, serde) => {
        impl ::serde::Serialize for $ty {
            fn serialize<S: ::serde::Serializer>(
                &self,
                s: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                d: D,
            ) -> ::core::result::Result<Self, D::Error> {
                <::std::string::String as ::serde::Deserialize<'de>>::deserialize(d).map(Self::new)
            }
        }
    };

    // ---- string codes ----
    (
        $(#[$attr:meta])*
        $vis:vis struct $ty:ident(str) $([$($opt:ident),* $(,)?])?;
        $($(#[$cattr:meta])* $name:ident;)*
    ) => {
        $(#[$attr])*
        #[derive(Clone)]
        $vis struct $ty(::std::borrow::Cow<'static, str>);

        #[allow(dead_code, unreachable_pub)]
        impl $ty {
            $($(#[$cattr])* pub const $name: Self = Self(::std::borrow::Cow::Borrowed(stringify!($name)));)*

            /// Every named code, in declaration order.
            pub const KNOWN: &'static [Self] = &[$(Self::$name),*];

            /// A code from its wire text (a known code borrows its constant, others are kept
            /// as sent).
            pub fn new(code: impl ::core::convert::Into<::std::borrow::Cow<'static, str>>) -> Self {
                let code = code.into();
                match Self::KNOWN.iter().find(|k| k.as_str() == code.as_ref()) {
                    ::core::option::Option::Some(known) => known.clone(),
                    ::core::option::Option::None => Self(code),
                }
            }

            /// The wire text (a named code's text is its constant's name).
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Whether this is one of the named codes.
            pub fn is_known(&self) -> bool {
                Self::KNOWN.contains(self)
            }
        }

        impl ::core::cmp::PartialEq for $ty {
            fn eq(&self, other: &Self) -> bool {
                self.as_str() == other.as_str()
            }
        }

        impl ::core::cmp::Eq for $ty {}

        impl ::core::hash::Hash for $ty {
            fn hash<H: ::core::hash::Hasher>(&self, state: &mut H) {
                self.as_str().hash(state);
            }
        }

        impl ::core::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                if self.is_known() {
                    f.write_str(self.as_str())
                } else {
                    ::core::write!(f, "{}({:?})", stringify!($ty), self.as_str())
                }
            }
        }

        impl ::core::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        $($($crate::open_codes!(@str_opt $ty, $opt);)*)?
    };

    // ---- integer codes ----
    (
        $(#[$attr:meta])*
        $vis:vis struct $ty:ident($int:ty) $([$($opt:ident),* $(,)?])? $(, text fn $text_fn:ident)?;
        $($(#[$cattr:meta])* $name:ident = $val:literal $(, $text:literal)?;)*
    ) => {
        $(#[$attr])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        $vis struct $ty(pub $int);

        #[allow(dead_code, unreachable_pub)]
        impl $ty {
            $($(#[$cattr])* pub const $name: Self = Self($val);)*

            /// The constant's name if this value has one.
            #[allow(unreachable_patterns)]
            pub fn name(self) -> ::core::option::Option<&'static str> {
                match self.0 {
                    $($val => ::core::option::Option::Some(stringify!($name)),)*
                    _ => ::core::option::Option::None,
                }
            }
        }

        impl ::core::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                const WITH_VALUE: bool =
                    false $($(|| $crate::open_codes!(@is with_value, $opt))*)?;
                match self.name() {
                    ::core::option::Option::Some(n) if WITH_VALUE => ::core::write!(f, "{n}({})", self.0),
                    ::core::option::Option::Some(n) => f.write_str(n),
                    ::core::option::Option::None => ::core::write!(f, "{}({})", stringify!($ty), self.0),
                }
            }
        }

        impl ::core::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                ::core::fmt::Display::fmt(&self.0, f)
            }
        }

        impl ::core::convert::From<$int> for $ty {
            fn from(v: $int) -> Self {
                Self(v)
            }
        }

        impl ::core::convert::From<$ty> for $int {
            fn from(v: $ty) -> Self {
                v.0
            }
        }

        $crate::open_codes!(@text_fn [$($text_fn)?] $ty { $($val $(, $text)?;)* });
        $crate::open_codes!(@opts $ty $int [$($name)*] $($($opt)*)?);
    };
}

/// Defines a string id newtype (`AgentId`, `SessionId`, ...) over `Arc<str>`: cheap to clone
/// into events, compared, ordered and hashed by its text.
///
/// ```
/// use std::collections::HashMap;
///
/// agentwire_core::string_id! {
///     /// An agent's id (`"agent-1"`).
///     pub struct AgentId;
/// }
///
/// let id = AgentId::from("agent-1");
/// assert_eq!(id, "agent-1");
/// assert_eq!(id.as_str(), "agent-1");
/// assert_eq!(id.to_string(), "agent-1");
/// assert_eq!(format!("{id:?}"), r#"AgentId("agent-1")"#);
/// let by_id: HashMap<AgentId, u32> = [(id.clone(), 1)].into();
/// assert_eq!(by_id.get("agent-1"), Some(&1)); // Borrow<str>
/// assert_eq!(AgentId::from(String::from("b")).into_string(), "b");
/// ```
///
/// Generated: `new(impl Into<Arc<str>>)`, `as_str`, `into_string`, `Clone`, `PartialEq`,
/// `Eq`, `PartialOrd`, `Ord`, `Hash` (all by text), `Default` (empty), `Debug`
/// (`AgentId("agent-1")`), `Display` (the text), `From<String>`, `From<&str>`,
/// `From<Arc<str>>`, `From<$ty> for String`, `AsRef<str>`, `Borrow<str>`, `Deref<Target =
/// str>`, and `PartialEq` with `str`, `&str` and `String`. The option `[serde]` adds
/// transparent `Serialize`/`Deserialize` as a JSON string (needs serde in the calling crate).
#[macro_export]
macro_rules! string_id {
    (@opt $ty:ident, serde) => {
        // A JSON string, read through `new` (the same impls as string codes).
        $crate::open_codes!(@str_opt $ty, serde);
    };
    (
        $(#[$attr:meta])*
        $vis:vis struct $ty:ident $([$($opt:ident),* $(,)?])?;
    ) => {
        $(#[$attr])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        $vis struct $ty(::std::sync::Arc<str>);

        #[allow(dead_code, unreachable_pub)]
        impl $ty {
            /// An id with this text.
            pub fn new(id: impl ::core::convert::Into<::std::sync::Arc<str>>) -> Self {
                Self(id.into())
            }

            /// The id's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id's text, owned.
            pub fn into_string(self) -> ::std::string::String {
                ::std::string::String::from(&*self.0)
            }
        }

        impl ::core::fmt::Debug for $ty {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                ::core::write!(f, "{}({:?})", stringify!($ty), self.as_str())
            }
        }

        impl ::core::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::core::convert::From<::std::string::String> for $ty {
            fn from(s: ::std::string::String) -> Self {
                Self(s.into())
            }
        }

        impl ::core::convert::From<&str> for $ty {
            fn from(s: &str) -> Self {
                Self(s.into())
            }
        }

        impl ::core::convert::From<::std::sync::Arc<str>> for $ty {
            fn from(s: ::std::sync::Arc<str>) -> Self {
                Self(s)
            }
        }

        impl ::core::convert::From<$ty> for ::std::string::String {
            fn from(id: $ty) -> Self {
                id.into_string()
            }
        }

        impl ::core::convert::AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }

        impl ::core::borrow::Borrow<str> for $ty {
            fn borrow(&self) -> &str {
                self.as_str()
            }
        }

        impl ::core::ops::Deref for $ty {
            type Target = str;
            fn deref(&self) -> &str {
                self.as_str()
            }
        }

        impl ::core::cmp::PartialEq<str> for $ty {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl ::core::cmp::PartialEq<&str> for $ty {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl ::core::cmp::PartialEq<::std::string::String> for $ty {
            fn eq(&self, other: &::std::string::String) -> bool {
                self.as_str() == other.as_str()
            }
        }

        $($($crate::string_id!(@opt $ty, $opt);)*)?
    };
}

#[cfg(test)]
mod tests {
    crate::open_codes! {
        /// A test code space with every option.
        #[derive(Default)]
        pub(crate) struct Code(u8) [known, with_value], text fn text;
        /// Zero.
        ZERO = 0, "zero";
        /// One, no text.
        ONE = 1;
    }

    crate::open_codes! {
        /// Bare `Debug`, no options.
        pub(crate) struct Neg(i32);
        /// Minus one.
        MINUS_ONE = -1;
    }

    crate::open_codes! {
        /// String codes.
        pub(crate) struct Word(str);
        /// A.
        ALPHA;
        /// B.
        BETA;
    }

    crate::string_id! {
        /// A test id.
        pub(crate) struct TestId;
    }

    #[test]
    fn integer_codes_name_print_and_convert() {
        assert_eq!(Code::default(), Code::ZERO);
        assert_eq!(Code::KNOWN, &[Code::ZERO, Code::ONE]);
        assert_eq!(Code::ONE.name(), Some("ONE"));
        assert_eq!(Code(9).name(), None);
        assert_eq!(Code::ZERO.text(), Some("zero"));
        assert_eq!(Code::ONE.text(), None);
        assert_eq!(format!("{:?}", Code::ONE), "ONE(1)");
        assert_eq!(format!("{:?}", Code(9)), "Code(9)");
        assert_eq!(format!("{:?}", Neg::MINUS_ONE), "MINUS_ONE");
        assert_eq!(format!("{:?}", Neg(-2)), "Neg(-2)");
        assert_eq!(format!("{:>3}", Neg(-2)), " -2");
        assert_eq!(i32::from(Neg::from(5)), 5);
        assert!(Neg::MINUS_ONE < Neg(0));
    }

    #[test]
    fn string_codes_keep_unknown_text() {
        let other = Word::new(String::from("GAMMA"));
        assert!(!other.is_known() && Word::new("BETA").is_known());
        assert_eq!(other.as_str(), "GAMMA");
        assert_eq!(format!("{other:?} {other}"), r#"Word("GAMMA") GAMMA"#);
        assert_eq!(format!("{:?}", Word::ALPHA), "ALPHA");
        assert_eq!(Word::KNOWN, &[Word::ALPHA, Word::BETA]);
        let set: std::collections::HashSet<Word> = [Word::new("ALPHA")].into();
        assert!(set.contains(&Word::ALPHA));
    }

    #[test]
    fn string_ids_compare_by_text() {
        let a = TestId::from("a");
        assert_eq!(a, "a");
        assert_eq!(a, *"a");
        assert_eq!(a, String::from("a"));
        assert!(a < TestId::new("b"));
        assert_eq!(TestId::default().as_str(), "");
        assert_eq!(a.len(), 1); // Deref<Target = str>
        let s: String = a.clone().into();
        assert_eq!(s, "a");
        assert_eq!(format!("{a:?}"), r#"TestId("a")"#);
    }

    #[cfg(feature = "json")]
    mod json {
        crate::open_codes! {
            /// Serde integer codes.
            pub(crate) struct Num(i32) [serde];
            /// Seven.
            SEVEN = 7;
        }

        crate::open_codes! {
            /// Serde string codes.
            pub(crate) struct Text(str) [serde];
            /// X.
            X;
        }

        crate::string_id! {
            /// A serde id.
            pub(crate) struct SerdeId [serde];
        }

        #[test]
        fn serde_is_transparent() {
            assert_eq!(serde_json::to_string(&Num::SEVEN).unwrap(), "7");
            assert_eq!(serde_json::from_str::<Num>("-3").unwrap(), Num(-3));
            assert_eq!(serde_json::to_string(&Text::X).unwrap(), r#""X""#);
            assert_eq!(serde_json::from_str::<Text>(r#""X""#).unwrap(), Text::X);
            assert!(serde_json::from_str::<Text>(r#""Y""#).is_ok_and(|t| !t.is_known()));
            assert_eq!(
                serde_json::to_string(&SerdeId::from("a\"b")).unwrap(),
                r#""a\"b""#
            );
            assert_eq!(
                serde_json::from_str::<SerdeId>(r#""a\"b""#).unwrap(),
                "a\"b"
            );
            assert!(serde_json::from_str::<SerdeId>("1").is_err());
        }
    }
}
