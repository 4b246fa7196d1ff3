"""TVMScript's names a user's source may reach through ``T``, ``I`` and ``R`` (and their
namespaces ``T.axis``, ``R.nn``, ...): the allow-list of `tuning.checks.script_filter`.

Generated from the pinned TVM (`tests/tuning/test_script_filter.py` regenerates it and fails
on any difference): every public attribute of the parser's ``T``, ``I`` and ``R`` that is not
a module (``I.entry`` is one: its ``inspect`` reaches ``builtins.exec``) nor a backend's
namespace of intrinsics (``T.cuda``, ``T.ptx``, ...), and the op namespaces of ``R``
(``R.nn``, ``R.image``, ...; not ``R.vm``, ``R.builtin``, ``R.memory``). Names only: what a
name builds is IR, which the jailed parse then checks (`tuning.checks.tir_checks`)."""

from __future__ import annotations


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


NAMESPACES: dict[str, frozenset[str]] = {
    "T": _names(
        """
    Add And Assert Bind BitwiseAnd BitwiseNot BitwiseOr BitwiseXor Break Broadcast Buffer
    BufferLoad Call CallEffectKind Cast CommReducer ComposeLayout Continue Div DtypeConstructor
    EQ Else ExecScope FloatImm FloorDiv FloorMod GE GT If IntImm Iter IterVar LE LShift LT
    Layout Let LetAnnotation LocalVectorAnnotation Max Min Mod Mul NE Not Optional Or Ptr R
    RShift Ramp Range Reduce Return S SMEMPool ScopeIdDef Select Shuffle Sub TMEMPool
    TVMBackendAllocWorkspace TVMBackendFreeWorkspace TensorMap Then TileLayout Tuple Var While
    abs acos acosh add_to_parent address_of alloc_buffer alloc_cast_frag alloc_local
    alloc_scalar alloc_shared alloc_tcgen05_ldst_frag anylist_getitem anylist_resetitem
    anylist_setitem_call_cpacked anylist_setitem_call_packed arg asin asinh assume atan atan2
    atanh attr axis bf16 bfloat16 bind bitwise_and bitwise_not bitwise_or bitwise_xor
    block_name_suffix_context bool boolean break_loop broadcast buffer buffer_decl buffer_proxy
    buffer_store buffer_var call_cpacked call_cpacked_lowered call_extern call_ffi_kernel
    call_intrin call_kernel call_llvm_intrin call_llvm_pure_intrin call_packed
    call_packed_lowered call_pure_extern cast ceil ceildiv cluster_id clz comm_reducer constexpr
    continue_loop cooperative_tensor_fill cooperative_tensor_load
    cooperative_tensor_multiply_accumulate cooperative_tensor_store copysign cos cosh cta_id
    cta_id_in_cluster cta_id_in_pair decl_buffer decl_scalar device_entry dp4a
    end_profile_intrinsic env_thread erf evaluate exp exp10 exp2 f16 f32 f64 fabs filter float16
    float16x16 float16x2 float16x32 float16x4 float16x64 float16x8 float32 float32x16 float32x2
    float32x32 float32x4 float32x64 float32x8 float4_e2m1fn float4_e2m1fnx16 float4_e2m1fnx2
    float4_e2m1fnx32 float4_e2m1fnx4 float4_e2m1fnx64 float4_e2m1fnx8 float64 float64x16
    float64x2 float64x32 float64x4 float64x64 float64x8 float6_e2m3fn float6_e2m3fnx16
    float6_e2m3fnx2 float6_e2m3fnx32 float6_e2m3fnx4 float6_e2m3fnx64 float6_e2m3fnx8
    float6_e3m2fn float6_e3m2fnx16 float6_e3m2fnx2 float6_e3m2fnx32 float6_e3m2fnx4
    float6_e3m2fnx64 float6_e3m2fnx8 float8_e3m4 float8_e3m4x16 float8_e3m4x2 float8_e3m4x32
    float8_e3m4x4 float8_e3m4x64 float8_e3m4x8 float8_e4m3 float8_e4m3b11fnuz
    float8_e4m3b11fnuzx16 float8_e4m3b11fnuzx2 float8_e4m3b11fnuzx32 float8_e4m3b11fnuzx4
    float8_e4m3b11fnuzx64 float8_e4m3b11fnuzx8 float8_e4m3fn float8_e4m3fnuz float8_e4m3fnuzx16
    float8_e4m3fnuzx2 float8_e4m3fnuzx32 float8_e4m3fnuzx4 float8_e4m3fnuzx64 float8_e4m3fnuzx8
    float8_e4m3fnx16 float8_e4m3fnx2 float8_e4m3fnx32 float8_e4m3fnx4 float8_e4m3fnx64
    float8_e4m3fnx8 float8_e4m3x16 float8_e4m3x2 float8_e4m3x32 float8_e4m3x4 float8_e4m3x64
    float8_e4m3x8 float8_e5m2 float8_e5m2fnuz float8_e5m2fnuzx16 float8_e5m2fnuzx2
    float8_e5m2fnuzx32 float8_e5m2fnuzx4 float8_e5m2fnuzx64 float8_e5m2fnuzx8 float8_e5m2x16
    float8_e5m2x2 float8_e5m2x32 float8_e5m2x4 float8_e5m2x64 float8_e5m2x8 float8_e8m0fnu
    float8_e8m0fnux16 float8_e8m0fnux2 float8_e8m0fnux32 float8_e8m0fnux4 float8_e8m0fnux64
    float8_e8m0fnux8 floor floordiv floormod fma fmod frame_scope func_attr func_name func_ret
    get_active_lane_mask grid handle handle_add_byte_offset hint hypot i16 i32 i64 i8
    if_then_else ignore_loop_partition index_map infinity init inline int16 int16x16 int16x2
    int16x32 int16x4 int16x64 int16x8 int32 int32x16 int32x2 int32x32 int32x4 int32x64 int32x8
    int64 int64x16 int64x2 int64x32 int64x4 int64x64 int64x8 int8 int8x16 int8x2 int8x32 int8x4
    int8x64 int8x8 isfinite isinf isnan isnullptr iter_var jit lane_id launch_thread ldexp let
    likely llvm_lookup_intrinsic_id local_scalar log log10 log1p log2 lookup_param macro
    masked_load masked_store match_buffer max max_value meta_class meta_var min min_value
    nearbyint nextafter parallel popcount pow prim_func print_buffer ptr ptr_byte_offset
    q_multiply_shift q_multiply_shift_per_axis ramp reads register_script_namespace reinterpret
    round rsqrt sblock sblock_alloc_buffer sblock_attr scalar_wrapper scope_id selector
    seq_scope serial shared_scalar shift_left shift_right sigmoid sin sinh smem sqrt
    start_profile_intrinsic static_assert tan tanh target tensormap_encode_tiled thread_binding
    thread_id thread_id_in_wg thread_return tmem trunc truncdiv truncmod tvm_access_ptr
    tvm_bmma_sync tvm_call_cpacked tvm_call_cpacked_lowered tvm_call_packed
    tvm_call_packed_lowered tvm_fill_fragment tvm_global_barrier_kinit tvm_kernel_replace_point
    tvm_load_matrix_sync tvm_mma_sync tvm_stack_alloca tvm_stack_make_array tvm_stack_make_shape
    tvm_storage_sync tvm_store_matrix_sync tvm_struct_get tvm_struct_set tvm_thread_allreduce
    tvm_thread_invariant tvm_throw_last_error tvm_tuple tvm_warp_activemask tvm_warp_shuffle
    tvm_warp_shuffle_down tvm_warp_shuffle_up tvm_warp_shuffle_xor type_annotation u16 u32 u64
    u8 uint16 uint16x16 uint16x2 uint16x32 uint16x4 uint16x64 uint16x8 uint32 uint32x16 uint32x2
    uint32x32 uint32x4 uint32x64 uint32x8 uint64 uint64x16 uint64x2 uint64x32 uint64x4 uint64x64
    uint64x8 uint8 uint8x16 uint8x2 uint8x32 uint8x4 uint8x64 uint8x8 undef unroll var
    vectorcombine vectorhigh vectorized vectorlow void vscale warp_id warp_id_in_wg warpgroup_id
    wg_reg_tile where writes
        """
    ),
    "T.axis": _names(
        """
    R S opaque reduce remap scan spatial
        """
    ),
    "I": _names(
        """
    GenericConst IRModuleFrame Range StringImm StringType decl_function def_function
    dummy_global_info ir_module lookup_name lookup_vdevice meta_var module_attrs module_get_attr
    module_global_infos module_set_attr pyfunc vdevice
        """
    ),
    "R": _names(
        """
    Any Callable DTensor Else ExternFunc If Object Prim SeqExpr Shape ShapeExpr Tensor Then
    Tuple TupleGetItem abs acos acosh add arange arg argmax argmin argsort asin asinh assert_op
    astype atan atan2 atanh bitwise_and bitwise_not bitwise_or bitwise_xor broadcast_to
    bucketize call_builtin_with_ctx call_dps_packed call_inplace_packed call_packed
    call_pure_packed call_py_func call_tir call_tir_inplace call_tir_with_grad ceil clip
    collapse_sum_like collapse_sum_to concat const cos cosh cpu cuda cumprod cumsum dataflow
    dequantize device device_mesh divide dtype dynamic_strided_slice einsum emit emit_match_cast
    emit_te emit_var_binding emit_with_ty emit_with_type equal erf ewise_fma exp expand_dims
    ext_dev eye eye_like flatten flip floor floor_divide floor_mod full full_like func_attr
    func_name func_ret_ty func_ret_type func_ret_value function gather_elements gather_nd
    greater greater_equal hamming_window hexagon hint_on_device index_put index_tensor
    invoke_closure invoke_pure_closure isfinite isinf isnan layout_transform left_shift less
    less_equal linear log log_add_exp logical_and logical_not logical_or logical_xor macro
    make_closure match_cast matmul max maximum mean median meshgrid metal min minimum mod
    multinomial_from_uniform multiply negative nonzero not_equal null_value one_hot ones
    ones_like opencl outer output permute_dims power prim_value print prod quantize repeat
    reshape reverse_sequence rewriter right_shift rocm round rsqrt scatter_elements scatter_nd
    shape shape_of shape_to_tensor sigmoid sign sin sinh size slice_scatter sort split sqrt
    square squeeze stack std stop_lift_params str strided_slice subtract sum take tan tanh
    tensor_to_shape tile to_vdevice topk tril triu trunc tuple unique variance vpi vulkan webgpu
    where wrap_param zeros zeros_like
        """
    ),
    "R.nn": _names(
        """
    adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d attention attention_bias
    attention_var_len avg_pool1d avg_pool2d avg_pool3d batch_flatten batch_norm conv1d
    conv1d_transpose conv2d conv2d_transpose conv3d conv3d_transpose cross_entropy_with_logits
    dropout gelu gelu_tanh group_norm instance_norm layer_norm leakyrelu log_softmax max_pool1d
    max_pool2d max_pool3d nll_loss pad pixel_shuffle prelu relu relu6 rms_norm selu silu softmax
    softplus
        """
    ),
    "R.image": _names(
        """
    affine_grid grid_sample resize2d resize3d
        """
    ),
    "R.vision": _names(
        """
    Expr all_class_non_max_suppression get_valid_counts multibox_transform_loc
    non_max_suppression roi_align roi_pool
        """
    ),
    "R.grad": _names(
        """
    Expr avg_pool2d_backward end_checkpoint max_pool2d_backward nll_loss_backward no_grad
    start_checkpoint take_backward
        """
    ),
    "R.ccl": _names(
        """
    allgather allreduce broadcast_from_worker0 scatter_from_worker0
        """
    ),
    "R.distributed": _names(
        """
    Call DTensorType DeviceMesh Expr ExternFunc GenericConst IRBuilder IRModuleFrame Number
    Optional Placement RxTuple Union annotate_sharding call_tir call_tir_local_view const
    convert_to_expr py_str redistribute redistribute_replica_to_shard
        """
    ),
}
