//! `neardup devices`: the GPU adapters wgpu sees.

use super::*;
#[cfg(feature = "gpu")]
use neardup::engine::gpu::{list_adapters, GpuOptions};

#[cfg(not(feature = "gpu"))]
pub(super) fn run(_: DevicesArgs) -> Result<ExitCode> {
    Err(neardup::engine::gpu::missing().into())
}

#[cfg(feature = "gpu")]
pub(super) fn run(a: DevicesArgs) -> Result<ExitCode> {
    let opts = GpuOptions {
        backend: a.backend,
        ..GpuOptions::default()
    };
    let adapters = list_adapters(&opts);
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&adapters)?);
        return Ok(ExitCode::SUCCESS);
    }
    if adapters.is_empty() {
        outln!(
            "no adapters found on backends {:?} (install a Vulkan driver; without a GPU: \
             apt-get install mesa-vulkan-drivers libvulkan1)",
            opts.backends()
        );
    }
    for (i, d) in adapters.iter().enumerate() {
        outln!(
            "[{i}] {}\n    backend: {}  type: {}{}\n    driver: {} {}\n    \
             max storage binding: {} MiB  max buffer: {} MiB\n    \
             max workgroups/dim: {}  max invocations/workgroup: {}  workgroup storage: {} KiB  \
             storage buffers/stage: {}\n    features: 64-bit shader integers {}, timestamp queries {}",
            d.name,
            d.backend,
            d.device_type,
            if d.software { " (software)" } else { "" },
            d.driver,
            d.driver_info,
            d.max_storage_buffer_binding_size >> 20,
            d.max_buffer_size >> 20,
            d.max_compute_workgroups_per_dimension,
            d.max_compute_invocations_per_workgroup,
            d.max_compute_workgroup_storage_size >> 10,
            d.max_storage_buffers_per_shader_stage,
            yes_no(d.shader_int64),
            yes_no(d.timestamp_query)
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "gpu")]
fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
