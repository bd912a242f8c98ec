/**
 * The product shim's symbol table: data only, exactly the exports of
 * `native/mtc.c` (CI compares it with the binary). Every parameter carries
 * its C type.
 *
 * Addresses, handles and byte counts cross as `f64` (C `addr_t`/`double`):
 * addresses are below 2^48 so doubles hold them exactly, and f64 parameters
 * stay on Deno's fast FFI path without BigInt or PointerObject allocations.
 *
 * @module
 */

/** The ABI version `native/mtc.c` reports; a mismatched library is refused. */
export const ABI_VERSION = 15;

/** Symbols of `libmtc.so`, typed for `Deno.dlopen`. */
export const symbols = {
  // int32_t mtc_abi_version(void)
  mtc_abi_version: { parameters: [], result: "i32" },
  // const char* mtc_source_hash(void): SHA-256 of the sources it was built from
  mtc_source_hash: { parameters: [], result: "pointer" },
  // const char* mtc_error_name(int32_t code)
  mtc_error_name: { parameters: ["i32"], result: "pointer" },
  // const char* mtc_error_string(int32_t code)
  mtc_error_string: { parameters: ["i32"], result: "pointer" },
  // int32_t mtc_cuda_status(int32_t out[3]): [driver version, devices, minimum driver]
  mtc_cuda_status: { parameters: ["buffer"], result: "i32" },
  // const char* mtc_cuda_status_detail(void)
  mtc_cuda_status_detail: { parameters: [], result: "pointer" },
  // int32_t mtc_host_alloc(double bytes, double* out_addr)
  mtc_host_alloc: { parameters: ["f64", "buffer"], result: "i32" },
  // int32_t mtc_host_free(addr_t p): parked while a JS view lives (host_views.c)
  mtc_host_free: { parameters: ["f64"], result: "i32" },
  // int32_t mtc_host_parked(double out[2]): [count, bytes] parked behind JS views
  mtc_host_parked: { parameters: ["buffer"], result: "i32" },
  // int32_t mtc_host_keep(addr_t address, double bytes): a view that never dies
  mtc_host_keep: { parameters: ["f64", "f64"], result: "i32" },
  // int32_t mtc_host_free_after_views(addr_t address, int32_t moved)
  mtc_host_free_after_views: { parameters: ["f64", "i32"], result: "i32" },
  // double mtc_host_ledger(void): which library's view ledger (host_views.c)
  mtc_host_ledger: { parameters: [], result: "f64" },
  // int32_t mtc_device_alloc(int32_t device, double bytes, double* out_addr)
  mtc_device_alloc: { parameters: ["i32", "f64", "buffer"], result: "i32" },
  // int32_t mtc_device_free(int32_t device, addr_t p)
  mtc_device_free: { parameters: ["i32", "f64"], result: "i32" },
  // int32_t mtc_event_create(int32_t device, double* out_handle)
  mtc_event_create: { parameters: ["i32", "buffer"], result: "i32" },
  // int32_t mtc_event_record(int32_t device, addr_t event)
  mtc_event_record: { parameters: ["i32", "f64"], result: "i32" },
  // int32_t mtc_event_query(int32_t device, addr_t event): 0 done, 600 pending, else error
  mtc_event_query: { parameters: ["i32", "f64"], result: "i32" },
  // int32_t mtc_event_synchronize(int32_t device, addr_t event), on a Deno blocking-pool thread
  mtc_event_synchronize_nonblocking: {
    name: "mtc_event_synchronize",
    parameters: ["i32", "f64"],
    result: "i32",
    nonblocking: true,
  },
  // int32_t mtc_copy_async(int32_t device, addr_t dst, addr_t src, double bytes, addr_t event_or_0)
  mtc_copy_async: {
    parameters: ["i32", "f64", "f64", "f64", "f64"],
    result: "i32",
  },
  // int32_t mtc_copy_from_buffer(int32_t device, addr_t dst, const uint8_t* src, double offset, double bytes)
  mtc_copy_from_buffer: {
    parameters: ["i32", "f64", "buffer", "f64", "f64"],
    result: "i32",
  },
  // int32_t mtc_stager_create(int32_t device, int32_t slots, double slot_bytes, double* out)
  mtc_stager_create: { parameters: ["i32", "i32", "f64", "buffer"], result: "i32" },
  // int32_t mtc_stager_stop(addr_t stager, double timeout_ms)
  mtc_stager_stop: { parameters: ["f64", "f64"], result: "i32" },
  // int32_t mtc_stager_destroy(addr_t stager)
  mtc_stager_destroy: { parameters: ["f64"], result: "i32" },
  // int32_t mtc_stage_buffer(addr_t stager, addr_t dst, const uint8_t* src, double offset, double bytes),
  // on a Deno blocking-pool thread, which keeps `src` alive for the call
  mtc_stage_buffer_nonblocking: {
    name: "mtc_stage_buffer",
    parameters: ["f64", "f64", "buffer", "f64", "f64"],
    result: "i32",
    nonblocking: true,
  },
  // int32_t mtc_copy_peer(int32_t dst_device, addr_t dst, int32_t src_device, addr_t src, double bytes,
  //                       addr_t before_copy, addr_t after_copy)
  mtc_copy_peer: {
    parameters: ["i32", "f64", "i32", "f64", "f64", "f64", "f64"],
    result: "i32",
  },
  // int32_t mtc_gather(int32_t device, addr_t table, int32_t count, addr_t dst, addr_t host_dst_or_0,
  //                    double bytes, addr_t event_or_0)
  mtc_gather: {
    parameters: ["i32", "f64", "i32", "f64", "f64", "f64", "f64"],
    result: "i32",
  },
  // int32_t mtc_stream_synchronize(int32_t device)
  mtc_stream_synchronize: { parameters: ["i32"], result: "i32" },
  // int32_t mtc_device_release_unused(int32_t device)
  mtc_device_release_unused: { parameters: ["i32"], result: "i32" },
  // int32_t mtc_copy_pieces(const double* table, int32_t count, int32_t threads): host memcpys
  mtc_copy_pieces: { parameters: ["buffer", "i32", "i32"], result: "i32" },
  // double mtc_address_of(const uint8_t* buffer)
  mtc_address_of: { parameters: ["buffer"], result: "f64" },
  // int32_t mtc_stream_library(int32_t device, int32_t which, double* out): 0 copy, 1 compute
  mtc_stream_library: { parameters: ["i32", "i32", "buffer"], result: "i32" },
  // int32_t mtc_stream_create(int32_t device, double* out)
  mtc_stream_create: { parameters: ["i32", "buffer"], result: "i32" },
  // int32_t mtc_stream_destroy(int32_t device, addr_t stream)
  mtc_stream_destroy: { parameters: ["i32", "f64"], result: "i32" },
  // int32_t mtc_stream_check(int32_t device, addr_t stream): 0, or 100007 for another device's
  mtc_stream_check: { parameters: ["i32", "f64"], result: "i32" },
  // int32_t mtc_stream_query(int32_t device, addr_t stream): 0 idle, 600 busy, else error
  mtc_stream_query: { parameters: ["i32", "f64"], result: "i32" },
  // int32_t mtc_stream_wait_idle(int32_t device, addr_t stream), on a Deno blocking-pool thread
  mtc_stream_wait_idle_nonblocking: {
    name: "mtc_stream_wait_idle",
    parameters: ["i32", "f64"],
    result: "i32",
    nonblocking: true,
  },
  // int32_t mtc_stream_fence(int32_t waiter_device, addr_t waiter, int32_t signal_device,
  //                          addr_t signaler, addr_t scratch_event)
  mtc_stream_fence: { parameters: ["i32", "f64", "i32", "f64", "f64"], result: "i32" },
  // int32_t mtc_stream_wait_event(int32_t device, addr_t stream, addr_t event)
  mtc_stream_wait_event: { parameters: ["i32", "f64", "f64"], result: "i32" },
  // int32_t mtc_event_record_on(int32_t device, addr_t stream, addr_t event)
  mtc_event_record_on: { parameters: ["i32", "f64", "f64"], result: "i32" },
  // int32_t mtc_module_load(int32_t device, const uint8_t* image, double* out, uint8_t* log,
  //                         int32_t log_bytes), on a Deno blocking-pool thread (the JIT)
  mtc_module_load_nonblocking: {
    name: "mtc_module_load",
    parameters: ["i32", "buffer", "buffer", "buffer", "i32"],
    result: "i32",
    nonblocking: true,
  },
  // int32_t mtc_module_unload(int32_t device, addr_t module)
  mtc_module_unload: { parameters: ["i32", "f64"], result: "i32" },
  // int32_t mtc_module_function(int32_t device, addr_t module, const char* name, double* out)
  mtc_module_function: { parameters: ["i32", "f64", "buffer", "buffer"], result: "i32" },
  // int32_t mtc_function_params(int32_t device, addr_t function, double* out, int32_t max)
  mtc_function_params: { parameters: ["i32", "f64", "buffer", "i32"], result: "i32" },
  // int32_t mtc_launch(int32_t device, addr_t function, addr_t stream, addr_t event_or_0,
  //                    const uint8_t* config): config = 8 x uint32 header, then the arguments
  mtc_launch: { parameters: ["i32", "f64", "f64", "f64", "buffer"], result: "i32" },

  // Process-wide caches (native/process_cache.c): kinds are -1 (pinned) or a device index.
  // int32_t mtc_isolate_attach(double* out_id)
  mtc_isolate_attach: { parameters: ["buffer"], result: "i32" },
  // int32_t mtc_isolate_end(int32_t id, double timeout_ms): 0, or 1 when staging did not stop
  mtc_isolate_end: { parameters: ["i32", "f64"], result: "i32" },
  // int32_t mtc_block_take(int32_t kind, int32_t isolate, double size, double out[2]): [id or -1, address]
  mtc_block_take: { parameters: ["i32", "i32", "f64", "buffer"], result: "i32" },
  // int32_t mtc_block_adopt(int32_t kind, int32_t isolate, addr_t address, double size, double* out_id)
  mtc_block_adopt: { parameters: ["i32", "i32", "f64", "f64", "buffer"], result: "i32" },
  // int32_t mtc_block_give(int32_t id, double max_cached_bytes)
  mtc_block_give: { parameters: ["i32", "f64"], result: "i32" },
  // int32_t mtc_block_free(int32_t id)
  mtc_block_free: { parameters: ["i32"], result: "i32" },
  // int32_t mtc_cache_trim(int32_t kind_or_minus2, double older_than_ms, double out[2]): [freed, next ms or -1]
  mtc_cache_trim: { parameters: ["i32", "f64", "buffer"], result: "i32" },
  // int32_t mtc_cache_counters(double out[2]): [address, count] of the shared counters
  mtc_cache_counters: { parameters: ["buffer"], result: "i32" },
  // int32_t mtc_cache_request_flush(void)
  mtc_cache_request_flush: { parameters: [], result: "i32" },
  // int32_t mtc_event_take(int32_t device, int32_t isolate, double out[2]): [handle, id]
  mtc_event_take: { parameters: ["i32", "i32", "buffer"], result: "i32" },
  // int32_t mtc_event_give(int32_t id)
  mtc_event_give: { parameters: ["i32"], result: "i32" },
  // int32_t mtc_stager_take(int32_t device, int32_t isolate, int32_t slots, double slot_bytes, double* out)
  mtc_stager_take: { parameters: ["i32", "i32", "i32", "f64", "buffer"], result: "i32" },
  // int32_t mtc_stager_give(addr_t stager)
  mtc_stager_give: { parameters: ["f64"], result: "i32" },
  // int32_t mtc_stagers_trim(double older_than_ms, double out[2]): [freed, next ms or -1]
  mtc_stagers_trim: { parameters: ["f64", "buffer"], result: "i32" },
  // int32_t mtc_function_limits(int32_t device, addr_t function, double out[3])
  mtc_function_limits: { parameters: ["i32", "f64", "buffer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/**
 * Symbols that only the test-aid build (`native/build/libmtc_testaid.so`,
 * the product plus `native/testaid.c`) exports.
 */
export const testAidSymbols = {
  // void mtc_counters(double out[4]): host allocs, device allocs, copies, kernels
  mtc_counters: { parameters: ["buffer"], result: "void" },
  // int32_t mtc_delay_stream(int32_t device, double microseconds)
  mtc_delay_stream: { parameters: ["i32", "f64"], result: "i32" },
  // int32_t mtc_copy_to_buffer(int32_t device, uint8_t* dst, double offset, addr_t src, double bytes)
  mtc_copy_to_buffer: {
    parameters: ["i32", "buffer", "f64", "f64", "f64"],
    result: "i32",
  },
  // int32_t mtc_delay_on(int32_t device, addr_t stream, double microseconds)
  mtc_delay_on: { parameters: ["i32", "f64", "f64"], result: "i32" },
  // int32_t mtc_copy_on(int32_t device, addr_t stream, addr_t dst, addr_t src, double bytes)
  mtc_copy_on: { parameters: ["i32", "f64", "f64", "f64", "f64"], result: "i32" },
  // int32_t mtc_mem_info(int32_t device, double out[2])
  mtc_mem_info: { parameters: ["i32", "buffer"], result: "i32" },
  // int32_t mtc_host_views(addr_t address)
  mtc_host_views: { parameters: ["f64"], result: "i32" },
  // void mtc_disable_kernels(int32_t disabled)
  mtc_disable_kernels: { parameters: ["i32"], result: "void" },
  // int32_t mtc_inject_fault(int32_t site, int32_t skip, int32_t cuda_error)
  mtc_inject_fault: { parameters: ["i32", "i32", "i32"], result: "i32" },
  // int32_t mtc_sum_f32(int32_t device, addr_t src, double count, addr_t dst)
  mtc_sum_f32: { parameters: ["i32", "f64", "f64", "f64"], result: "i32" },
  // int32_t mtc_trigger_illegal_address(int32_t device)
  mtc_trigger_illegal_address: { parameters: ["i32"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;
