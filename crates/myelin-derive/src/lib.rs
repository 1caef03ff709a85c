//! `#[derive(Message)]` for myelin: implements `myelin::Message` with the
//! type's name (`<cargo package>/msg/<Type>`, `-` read as `_`, or
//! `#[message(name = "pkg/msg/Type")]`)
//! and a schema hash computed from the field names and types in declaration
//! order, so two builds that disagree on a type's layout never connect.
//!
//! ```ignore
//! #[derive(Clone, myelin::Message)]
//! #[message(name = "nav_msgs/msg/Odometry")]
//! struct Odometry { x: f64, y: f64, theta: f64 }
//! ```
//!
//! To cross processes a type names its wire encoding:
//! * `#[message(pod)]`: plain old data (`#[repr(C)]` + `bytemuck::Pod`),
//!   read in place from shared memory (zero copies);
//! * `#[message(cdr)]`: `serde::Serialize + Deserialize`, sent as CDR.
//!
//! A type that mirrors a ROS 2 `.msg` adds its REP-2011 hash,
//! `#[message(ros_hash = "RIHS01_...")]`, so the zenoh transport names the
//! topic as rmw_zenoh does and ROS 2 nodes match it; its schema hash is
//! then derived from the ROS hash (`TypeHash::of_ros_hash`).
#![warn(missing_docs)]

use proc_macro::TokenStream;
use quote::{ToTokens, quote};
use syn::{Data, DeriveInput, Fields, LitStr, parse_macro_input};

/// Derive `myelin::Message`. See the crate docs.
#[proc_macro_derive(Message, attributes(message))]
pub fn derive_message(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn fields_schema(fields: &Fields) -> String {
    let mut s = String::new();
    match fields {
        Fields::Named(n) => {
            for f in &n.named {
                let name = f.ident.as_ref().map(|i| i.to_string()).unwrap_or_default();
                s.push_str(&format!("{name}:{};", f.ty.to_token_stream()));
            }
        }
        Fields::Unnamed(u) => {
            for (i, f) in u.unnamed.iter().enumerate() {
                s.push_str(&format!("{i}:{};", f.ty.to_token_stream()));
            }
        }
        Fields::Unit => {}
    }
    s
}

fn expand(input: DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let ident = &input.ident;
    let mut name_override: Option<LitStr> = None;
    let mut wire: Option<&'static str> = None;
    let mut ros_hash: Option<LitStr> = None;
    let mut describe: Option<syn::Path> = None;
    for attr in &input.attrs {
        if attr.path().is_ident("message") {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("name") {
                    name_override = Some(meta.value()?.parse()?);
                    Ok(())
                } else if meta.path.is_ident("pod") {
                    wire = Some("pod");
                    Ok(())
                } else if meta.path.is_ident("cdr") {
                    wire = Some("cdr");
                    Ok(())
                } else if meta.path.is_ident("ros_hash") {
                    let h: LitStr = meta.value()?.parse()?;
                    let v = h.value();
                    if !(v.len() == 71
                        && v.starts_with("RIHS01_")
                        && v[7..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
                    {
                        return Err(meta.error("`ros_hash` must be \"RIHS01_\" and 64 lowercase hex digits"));
                    }
                    ros_hash = Some(h);
                    Ok(())
                } else if meta.path.is_ident("describe") {
                    describe = Some(meta.value()?.parse()?);
                    Ok(())
                } else {
                    Err(meta.error(
                        "unknown message attribute: expected `name = \"pkg/msg/Type\"`, `pod`, `cdr`, `ros_hash = \"RIHS01_...\"` or `describe = path::to::fn`",
                    ))
                }
            })?;
        }
    }
    let schema = match &input.data {
        Data::Struct(s) => format!("struct {ident}{{{}}}", fields_schema(&s.fields)),
        Data::Enum(e) => {
            let mut s = format!("enum {ident}{{");
            for v in &e.variants {
                s.push_str(&format!("{}({})|", v.ident, fields_schema(&v.fields)));
            }
            s.push('}');
            s
        }
        Data::Union(_) => {
            return Err(syn::Error::new_spanned(
                ident,
                "Message cannot be derived for unions",
            ));
        }
    };
    // Without `name`, the ROS-style `<package>/msg/<Type>` of the Cargo
    // package being compiled: every binary, example and test of a package
    // that defines the same struct names it the same, so they talk (the
    // schema hash still tells different layouts apart).
    let type_name = match name_override {
        Some(n) => quote!(#n),
        None => {
            let package = std::env::var("CARGO_PKG_NAME")
                .unwrap_or_else(|_| "myelin_user".into())
                .replace('-', "_");
            let s = format!("{package}/msg/{ident}");
            quote!(#s)
        }
    };
    let (impl_g, ty_g, where_c) = input.generics.split_for_impl();
    let wire_items = match wire {
        None => quote!(),
        Some("pod") => quote! {
            const WIRE: ::myelin::Wire = ::myelin::Wire::Pod;
            fn wire_len(&self) -> ::core::result::Result<usize, ::myelin::WireError> {
                Ok(::core::mem::size_of::<Self>())
            }
            fn wire_encode(&self, out: &mut [u8]) -> ::core::result::Result<(), ::myelin::WireError> {
                ::myelin::wire::pod_codec::encode(self, out)
            }
            fn wire_decode(bytes: ::myelin::SharedBytes) -> ::core::result::Result<Self, ::myelin::WireError> {
                ::myelin::wire::pod_codec::decode(bytes, <Self as ::myelin::Message>::TYPE_NAME)
            }
            fn wire_view(bytes: &[u8]) -> ::core::option::Option<&Self> {
                ::myelin::wire::pod_codec::view(bytes)
            }
        },
        Some(_) => quote! {
            const WIRE: ::myelin::Wire = ::myelin::Wire::Cdr;
            fn wire_len(&self) -> ::core::result::Result<usize, ::myelin::WireError> {
                ::myelin::wire::cdr_codec::len(self)
            }
            fn wire_encode(&self, out: &mut [u8]) -> ::core::result::Result<(), ::myelin::WireError> {
                ::myelin::wire::cdr_codec::encode(self, out, <Self as ::myelin::Message>::TYPE_NAME)
            }
            fn wire_decode(bytes: ::myelin::SharedBytes) -> ::core::result::Result<Self, ::myelin::WireError> {
                ::myelin::wire::cdr_codec::decode(&bytes, <Self as ::myelin::Message>::TYPE_NAME)
            }
            fn wire_decode_parts(parts: &[&[u8]]) -> ::core::result::Result<Self, ::myelin::WireError> {
                ::myelin::wire::cdr_codec::decode_parts(parts, <Self as ::myelin::Message>::TYPE_NAME)
            }
        },
    };
    // A type that names its ROS 2 hash is that ROS type, whatever the Rust
    // field names: its identity is the ROS hash (so a tool that only knows
    // the ROS name and hash, a bag player, matches it).
    let (ros_hash_item, hash_item) = match ros_hash {
        Some(h) => (
            quote!(const ROS_TYPE_HASH: ::core::option::Option<&'static str> = ::core::option::Option::Some(#h);),
            quote!(::myelin::TypeHash::of_ros_hash(#h)),
        ),
        None => (quote!(), quote!(::myelin::TypeHash::of_schema(#schema))),
    };
    // `describe = f`: `f(type name)` gives the type's description (REP
    // 2016) for the `~/get_type_description` of the nodes that use it.
    let describe_item = match describe {
        Some(f) => quote! {
            fn ros_type_description() -> ::core::option::Option<::myelin::type_description::Described> {
                #f(<Self as ::myelin::Message>::TYPE_NAME)
            }
        },
        None => quote!(),
    };
    Ok(quote! {
        impl #impl_g ::myelin::Message for #ident #ty_g #where_c {
            const TYPE_NAME: &'static str = #type_name;
            const TYPE_HASH: ::myelin::TypeHash = #hash_item;
            #ros_hash_item
            #wire_items
            #describe_item
        }
    })
}
