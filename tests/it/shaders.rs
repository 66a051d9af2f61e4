//! Every WGSL file is parsed and validated by naga (no adapter needed), composed the way the
//! engine loads it, and the host-side mirrors agree with the shaders: the uniform block's
//! fields and size, and the tiling constants.

use neardup::engine::gpu::plan::CHUNK;
use neardup::engine::gpu::shaders::{composed, composed_with, BINDINGS, STAGES, U64, U64_NATIVE};
use neardup::engine::gpu::GpuConfig;

fn validate(name: &str, src: &str) -> naga::Module {
    validate_with(name, src, naga::valid::Capabilities::empty())
}

fn validate_with(name: &str, src: &str, caps: naga::valid::Capabilities) -> naga::Module {
    let module = naga::front::wgsl::parse_str(src)
        .unwrap_or_else(|e| panic!("{name} does not parse:\n{}", e.emit_to_string(src)));
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .unwrap_or_else(|e| panic!("{name} does not validate:\n{}", e.emit_to_string(src)));
    module
}

/// The native prelude needs 64-bit shader integers, and nothing else.
fn validate_native(name: &str, src: &str) -> naga::Module {
    validate_with(name, src, naga::valid::Capabilities::SHADER_INT64)
}

#[test]
fn every_wgsl_file_in_shaders_validates() {
    let dir = crate::common::root().join("shaders");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "wgsl") {
            let src = std::fs::read_to_string(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            // Stages use the shared helpers, so they are validated as the engine composes them,
            // after either prelude.
            match name.as_str() {
                "u64.wgsl" => drop(validate(&name, &src)),
                "u64_native.wgsl" => drop(validate_native(&name, &src)),
                // Declarations only: validated alone, and before every stage.
                "bindings.wgsl" => drop(validate(&name, &src)),
                _ => {
                    validate(&name, &composed(&src));
                    validate_native(&name, &composed_with(U64_NATIVE, &src));
                }
            }
            seen += 1;
        }
    }
    assert_eq!(
        seen, 6,
        "u64.wgsl, u64_native.wgsl, bindings.wgsl, hash.wgsl, minhash.wgsl and fused.wgsl"
    );
}

/// Without 64-bit shader integers the native prelude is refused, so it can only be loaded on
/// an adapter that offers them.
#[test]
fn the_native_prelude_needs_64_bit_shader_integers() {
    let module = naga::front::wgsl::parse_str(U64_NATIVE).expect("it parses");
    let r = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    )
    .validate(&module);
    assert!(r.is_err(), "u64_native.wgsl validated without SHADER_INT64");
}

/// The native prelude defines every function of the emulated one with the same argument and
/// result types, so a stage composes after either unchanged.
#[test]
fn both_preludes_define_the_same_functions() {
    let sigs = |m: &naga::Module| {
        let ty = |h: naga::Handle<naga::Type>| format!("{:?}", m.types[h].inner);
        let mut v: Vec<(String, Vec<String>, Option<String>)> = m
            .functions
            .iter()
            .map(|(_, f)| {
                (
                    f.name.clone().unwrap(),
                    f.arguments.iter().map(|a| ty(a.ty)).collect(),
                    f.result.as_ref().map(|r| ty(r.ty)),
                )
            })
            .collect();
        v.sort();
        v
    };
    let emulated = sigs(&validate("u64.wgsl", U64));
    let native = sigs(&validate_native("u64_native.wgsl", U64_NATIVE));
    for f in &emulated {
        assert!(native.contains(f), "u64_native.wgsl lacks {f:?}");
    }
}

#[test]
fn the_embedded_sources_are_the_files_on_disk() {
    let dir = crate::common::root().join("shaders");
    assert_eq!(U64, std::fs::read_to_string(dir.join("u64.wgsl")).unwrap());
    assert_eq!(
        BINDINGS,
        std::fs::read_to_string(dir.join("bindings.wgsl")).unwrap()
    );
    assert_eq!(
        U64_NATIVE,
        std::fs::read_to_string(dir.join("u64_native.wgsl")).unwrap()
    );
    for (name, src) in STAGES {
        assert_eq!(
            src,
            std::fs::read_to_string(dir.join(name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn the_config_struct_mirrors_gpu_config() {
    let host_fields = [
        "k",
        "num_docs",
        "num_shingles",
        "num_perm",
        "num_chunks",
        "hash_groups_x",
        "min_groups_x",
        "init_groups_x",
    ];
    assert_eq!(std::mem::size_of::<GpuConfig>(), host_fields.len() * 4);
    for (name, src) in STAGES {
        let m = validate(name, &composed(src));
        let (_, ty) = m
            .types
            .iter()
            .find(|(_, t)| t.name.as_deref() == Some("Config"))
            .unwrap_or_else(|| panic!("{name} has no struct Config"));
        match &ty.inner {
            naga::TypeInner::Struct { members, span } => {
                let names: Vec<&str> = members.iter().map(|m| m.name.as_deref().unwrap()).collect();
                assert_eq!(names, host_fields, "{name}: Config fields");
                assert_eq!(
                    *span as usize,
                    std::mem::size_of::<GpuConfig>(),
                    "{name}: Config size"
                );
                for (i, m) in members.iter().enumerate() {
                    assert_eq!(
                        m.offset as usize,
                        i * 4,
                        "{name}: Config.{} offset",
                        names[i]
                    );
                }
            }
            other => panic!("{name}: Config is {other:?}"),
        }
    }
}

#[test]
fn tiling_constants_match_the_host() {
    for (name, src) in [STAGES[1], STAGES[2]] {
        let m = validate(name, &composed(src));
        let chunk = m
            .constants
            .iter()
            .find(|(_, c)| c.name.as_deref() == Some("CHUNK"))
            .map(|(_, c)| c.init)
            .unwrap_or_else(|| panic!("{name} declares CHUNK"));
        match m.global_expressions[chunk] {
            naga::Expression::Literal(naga::Literal::U32(v)) => {
                assert_eq!(v as usize, CHUNK, "{name}")
            }
            ref other => panic!("{name}: CHUNK is {other:?}"),
        }
    }
}
