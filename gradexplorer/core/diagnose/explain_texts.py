"""The texts ``explain`` fills in: per backward op, its formula with shape placeholders.

Placeholders: ``{g}`` the gradient the node receives (shape of its forward output), ``{x0}``,
``{x1}``… the inputs by slot (what it sends back), ``{saved_KEY}`` a saved tensor, ``{param}``
and ``{module}``. Keys are exact node names, or names without ``BackwardN`` for every version.
"""

from __future__ import annotations

_VIEW = ("Reshapes the incoming gradient {g} back to the input's shape {x0}: grad_input = "
         "grad_output.{how}. No arithmetic, so the values pass through unchanged.")

TEXTS: dict[str, str] = {
    # leaves and hooks
    "AccumulateGrad": "Adds the incoming gradient {g} into {param}.grad (param.grad += grad). "
                      "This is where a gradient stops: the optimizer reads .grad.",
    "BackwardHookFunctionBackward": "Where module {module}'s full backward hook runs: it hands the "
                                    "gradients flowing through here to the hook, which may replace them.",
    # linear algebra
    "AddmmBackward0": "Forward out {g} = bias + mat1 · mat2 (a Linear layer: mat1 the input, mat2 "
                      "the weight, transposed for nn.Linear). Backward: "
                      "grad_mat1 {x1} = grad_output {g} · mat2ᵀ; "
                      "grad_mat2 {x2} = mat1ᵀ · grad_output; grad_bias {x0} = Σ over rows of grad_output.",
    "MmBackward0": "Forward out {g} = A · B. Backward: grad_A {x0} = grad_output {g} · Bᵀ; "
                   "grad_B {x1} = Aᵀ · grad_output.",
    "BmmBackward0": "Batched matrix product out {g} = A @ B (one product per batch entry; in "
                    "attention Q·Kᵀ or P·V). Backward per batch entry: grad_A {x0} = grad_output {g} "
                    "@ Bᵀ; grad_B {x1} = Aᵀ @ grad_output.",
    "BaddbmmBackward0": "Forward out {g} = β·input + α·(A @ B) per batch entry. Backward: "
                        "grad_input = β·grad_output; grad_A = α·grad_output @ Bᵀ; "
                        "grad_B = α·Aᵀ @ grad_output.",
    "ConvolutionBackward0": "Forward: a convolution, output {g} from input {x0} and weight {x1}. "
                            "Backward: grad_input {x0} = transposed convolution of grad_output {g} "
                            "with the weight; grad_weight {x1} = correlation of the input with "
                            "grad_output, summed over the batch; grad_bias = Σ grad_output over "
                            "batch and positions (one value per output channel).",
    "EmbeddingBackward0": "Forward: out {g} = weight[indices], one row of the table per index. "
                          "Backward: grad_weight {x0} starts at zero and each row of grad_output is "
                          "added to the row its index picked (scatter-add); rows no index used get 0.",
    "ScaledDotProductFlashAttentionForCpuBackward0": "Attention: S = Q·Kᵀ/√d, P = softmax(S), "
        "O = P·V ({g}). Backward: grad_V = Pᵀ·grad_O; grad_P = grad_O·Vᵀ; grad_S = P ⊙ (grad_P − "
        "rowsum(grad_P ⊙ P)); grad_Q = grad_S·K/√d; grad_K = grad_Sᵀ·Q/√d. P is recomputed from "
        "Q, K and the saved log-sum-exp instead of being stored.",
    # attention and normalisation
    "SoftmaxBackward0": "Softmax y = exp(x)/Σexp(x) along one dimension ({g}; in attention the "
                        "weights P). Backward: grad_x = y ⊙ (grad_y − Σ(grad_y ⊙ y)), the sum along "
                        "that dimension: the Jacobian diag(y) − y·yᵀ applied to grad_y.",
    "SafeSoftmaxBackward0": "Softmax y = exp(x)/Σexp(x) along one dimension ({g}), returning 0 for rows "
                            "that are fully masked (attention). Backward: grad_x = y ⊙ (grad_y − "
                            "Σ(grad_y ⊙ y)) along that dimension.",
    "LogSoftmaxBackward0": "log-softmax y = x − log Σexp(x) ({g}). Backward: grad_x = grad_y − "
                           "softmax(x) · Σ grad_y (softmax = exp(y), from the saved result).",
    "NativeLayerNormBackward0": "Layer norm: x̂ = (x − μ)/σ over the last dimensions of {x0}, y = γ·x̂ + β. "
                                "Backward: with ĝ = grad_y ⊙ γ, "
                                "grad_x {x0} = (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂))/σ; grad_γ {x1} = "
                                "Σ grad_y ⊙ x̂ and grad_β {x2} = Σ grad_y over the other dimensions.",
    "NativeBatchNormBackward0": "Batch norm in training: x̂ = (x − μ_B)/σ_B per channel over the batch "
                                "and positions of {x0}, y = γ·x̂ + β. Backward: with ĝ = grad_y ⊙ γ, grad_x = "
                                "(ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂))/σ_B per channel; grad_γ = Σ grad_y ⊙ x̂; "
                                "grad_β = Σ grad_y.",
    "NativeDropoutBackward0": "Dropout y = x ⊙ mask / (1 − p). Backward: grad_x = grad_y ⊙ mask / (1 − p): "
                              "dropped units get no gradient, kept ones are scaled.",
    # activations
    "ReluBackward0": "ReLU y = max(x, 0) ({g}). Backward: grad_x = grad_y where y > 0, else 0 "
                     "(a dead unit passes no gradient).",
    "TanhBackward0": "tanh ({g}; also inside GPT-2's GELU). Backward: grad_x = grad_y ⊙ (1 − y²), from "
                     "the saved output y.",
    "SigmoidBackward0": "Sigmoid y = 1/(1 + e⁻ˣ) ({g}). Backward: grad_x = grad_y ⊙ y ⊙ (1 − y).",
    "GeluBackward0": "GELU y = x·Φ(x) ({g}). Backward: grad_x = grad_y ⊙ (Φ(x) + x·φ(x)) (the tanh "
                     "approximation when approximate='tanh').",
    "SiluBackward0": "SiLU y = x·σ(x) ({g}). Backward: grad_x = grad_y ⊙ σ(x)(1 + x(1 − σ(x))).",
    "LeakyReluBackward0": "Leaky ReLU ({g}). Backward: grad_x = grad_y where x > 0, else slope · grad_y.",
    "HardtanhBackward0": "Hardtanh / ReLU6 clamp ({g}). Backward: grad_x = grad_y inside the limits, else 0.",
    # elementwise arithmetic
    "AddBackward0": "Sum out {g} = a + α·b. Backward: grad_a = grad_output, grad_b = α·grad_output, each "
                    "summed over the dimensions it was broadcast along (a {x0}, b {x1}); a residual "
                    "connection passes the gradient to both branches unchanged.",
    "AddBackward1": "out {g} = a + constant. Backward: grad_a {x0} = grad_output.",
    "SubBackward0": "out {g} = a − α·b. Backward: grad_a = grad_output, grad_b = −α·grad_output (summed "
                    "over broadcast dimensions).",
    "SubBackward1": "out {g} = a − constant. Backward: grad_a {x0} = grad_output.",
    "RsubBackward1": "out {g} = constant − a. Backward: grad_a {x0} = −grad_output.",
    "NegBackward0": "out = −a ({g}). Backward: grad_a = −grad_output.",
    "MulBackward0": "Product out {g} = a ⊙ b. Backward: grad_a {x0} = grad_output ⊙ b and grad_b {x1} = "
                    "grad_output ⊙ a, each summed over broadcast dimensions; each factor is saved for "
                    "the other's gradient.",
    "MulBackward1": "out {g} = a · constant. Backward: grad_a {x0} = grad_output · constant.",
    "DivBackward0": "Quotient out {g} = a / b. Backward: grad_a {x0} = grad_output / b; grad_b {x1} = "
                    "−grad_output ⊙ a / b² (summed over broadcast dimensions); infinite where b = 0.",
    "DivBackward1": "out {g} = a / constant. Backward: grad_a {x0} = grad_output / constant.",
    "PowBackward0": "Power out {g} = xᵖ, p a number (GPT-2's GELU uses x³). Backward: grad_x = "
                    "grad_output ⊙ p·xᵖ⁻¹, from the saved x.",
    "PowBackward1": "Power out {g} = xʸ with a tensor exponent. Backward: grad_x = grad_output ⊙ y·xʸ⁻¹; "
                    "grad_y = grad_output ⊙ xʸ·ln x.",
    "SqrtBackward0": "Square root y = √x ({g}). Backward: grad_x = grad_y / (2√x), from the saved output "
                     "y = √x: infinite where x = 0, a classic birthplace of Inf and NaN (0 · ∞).",
    "RsqrtBackward0": "y = 1/√x ({g}). Backward: grad_x = −grad_y ⊙ y³/2; infinite at x = 0.",
    "ExpBackward0": "y = eˣ ({g}). Backward: grad_x = grad_y ⊙ y, from the saved output.",
    "LogBackward0": "y = ln x ({g}). Backward: grad_x = grad_y / x: infinite at x = 0.",
    "AbsBackward0": "y = |x| ({g}). Backward: grad_x = grad_y ⊙ sign(x) (0 at x = 0).",
    "ClampBackward1": "Clamp to [min, max] ({g}). Backward: grad_x = grad_y inside the range, else 0.",
    "ClampMinBackward0": "Clamp from below ({g}). Backward: grad_x = grad_y where x ≥ min, else 0.",
    "MaximumBackward0": "Elementwise max(a, b) ({g}). Backward: the gradient goes to the larger input "
                        "(split in half on ties).",
    "WhereBackward0": "where(cond, a, b) ({g}). Backward: grad_a = grad_output where cond, else 0; grad_b "
                      "= grad_output where not cond, else 0.",
    "MaskedFillBackward0": "masked_fill ({g}). Backward: grad_x = grad_output with the filled positions "
                           "set to 0 (they no longer depend on x).",
    # reductions and losses
    "SumBackward0": "Sum of all {x0} elements to a scalar. Backward: grad_x {x0} = grad_output "
                    "broadcast to every element.",
    "SumBackward1": "Sum along dimensions, {x0} → {g}. Backward: grad_x = grad_output expanded back "
                    "along the summed dimensions.",
    "MeanBackward0": "Mean of all N elements of {x0}. Backward: grad_x = grad_output / N at every element.",
    "MeanBackward1": "Mean along dimensions, {x0} → {g}. Backward: grad_x = grad_output / n expanded "
                     "along the averaged dimensions (n elements each).",
    "MseLossBackward0": "Mean squared error L = mean((x − y)²) with x {x0}. Backward: grad_x = grad_L · "
                        "2(x − y)/N; grad_y = −grad_x when the target needs a gradient.",
    "NllLossBackward0": "Negative log-likelihood L = −mean(logp[i, target[i]]) with log-probabilities "
                        "{x0}. Backward: grad_logp = −grad_L/N at each row's target class, 0 elsewhere "
                        "(with log-softmax before it, this gives softmax − one-hot).",
    "MaxPool2DWithIndicesBackward0": "Max pooling {x0} → {g}. Backward: each window's gradient goes "
                                     "entirely to the position that held its maximum (the saved "
                                     "indices); every other position gets 0.",
    "AvgPool2DBackward0": "Average pooling {x0} → {g}. Backward: each window's gradient is spread evenly "
                          "over its positions (divided by the window size).",
    "AdaptiveAvgPool2DBackward0": "Adaptive average pooling {x0} → {g}. Backward: each output's gradient "
                                  "is spread evenly over the input cells it averaged.",
    # views and data movement
    "ViewBackward0": _VIEW.replace("{how}", "view({x0})"),
    "UnsafeViewBackward0": _VIEW.replace("{how}", "view({x0})"),
    "ReshapeAliasBackward0": _VIEW.replace("{how}", "reshape({x0})"),
    "AliasBackward0": "An alias of its input ({g}): the gradient passes through unchanged.",
    "CloneBackward0": "A copy of its input ({g}, e.g. .contiguous()): the gradient passes through unchanged.",
    "ToCopyBackward0": "A dtype or device conversion ({g}): the gradient is converted back to the "
                       "input's dtype and device {x0}.",
    "TBackward0": "Transpose of a matrix, {x0} → {g} (Linear uses Wᵀ). Backward: grad_input = "
                  "grad_outputᵀ, shape {x0}.",
    "TransposeBackward0": "Swaps two dimensions, {x0} → {g} (attention heads). Backward: the same swap "
                          "on grad_output gives {x0}.",
    "PermuteBackward0": "Permutes dimensions, {x0} → {g}. Backward: the inverse permutation on grad_output.",
    "ExpandBackward0": "Broadcasts {x0} to {g} without copying. Backward: grad_input {x0} = grad_output "
                       "summed over the expanded dimensions.",
    "SqueezeBackward0": "Drops size-1 dimensions, {x0} → {g}. Backward: grad_output reshaped back to {x0}.",
    "SqueezeBackward1": "Drops one size-1 dimension, {x0} → {g}. Backward: unsqueeze it back to {x0}.",
    "UnsqueezeBackward0": "Adds a size-1 dimension, {x0} → {g}. Backward: squeeze it away to {x0}.",
    "SelectBackward0": "Picks one index along a dimension of {x0} ({g}). Backward: a zero tensor {x0} "
                       "with grad_output written at that index.",
    "SliceBackward0": "A slice of {x0} ({g}). Backward: a zero tensor {x0} with grad_output written "
                      "into the slice.",
    "IndexBackward0": "Advanced indexing x[idx] of {x0} ({g}). Backward: zeros {x0} with grad_output "
                      "scatter-added at the indexed positions (repeated indices add up).",
    "CatBackward0": "Concatenates its inputs into {g}. Backward: grad_output is split back into the "
                    "pieces, {x0} for the first input and so on.",
    "StackBackward0": "Stacks its inputs into {g}. Backward: grad_output is unbound along the new "
                      "dimension, one slice per input.",
    "SplitBackward0": "Splits {x0} into pieces (GPT-2 splits the fused Q, K, V projection). Backward: "
                      "the pieces' gradients are concatenated back into {x0} (zeros for unused pieces).",
    "SplitWithSizesBackward0": "Splits {x0} into pieces of given sizes. Backward: the pieces' gradients "
                               "are concatenated back into {x0}.",
    "AsStridedBackward0": "A strided view of {x0} ({g}). Backward: grad_output is scattered back onto "
                          "the storage positions the view read.",
}

SAVED_WHY: dict[str, str] = {
    "mat1": "the input, needed for the gradient of mat2",
    "mat2": "the other factor, needed for the gradient of mat1",
    "self": "the input x, needed because the derivative depends on it",
    "other": "the other operand, needed for this operand's gradient",
    "result": "the output, from which the derivative is computed",
    "result1": "a second forward output, reused in backward",
    "result2": "a third forward output, reused in backward",
    "input": "the forward input, needed for the weight's gradient",
    "weight": "the weight, needed for the input's gradient",
    "bias": "the bias (only its presence matters)",
    "indices": "which rows or positions were picked, to route the gradient back",
    "target": "the target, needed for the loss's derivative",
    "query": "Q, for grad_K", "key": "K, for grad_Q", "value": "V, for grad_P",
    "output": "O, for the softmax backward", "logsumexp": "to recompute P without storing it",
    "save_mean": "the batch mean", "save_invstd": "1/σ of the batch",
    "running_mean": "kept with the node, not used by the training backward",
    "running_var": "kept with the node, not used by the training backward",
    "mask": "which units were dropped",
    "condition": "which branch each element took",
    "exponent": "the exponent p",
}

# Where a saved tensor's role depends on the op, its own reason wins over SAVED_WHY.
SAVED_WHY_BY_OP: dict[str, dict[str, str]] = {
    "NativeLayerNormBackward0": {"input": "x, to recompute x̂", "result1": "μ of each row",
                                 "result2": "1/σ of each row", "weight": "γ, for ĝ = grad_y ⊙ γ"},
    "NativeBatchNormBackward0": {"input": "x, to recompute x̂", "result1": "the batch mean μ_B",
                                 "result2": "1/σ_B of the batch", "weight": "γ, for ĝ = grad_y ⊙ γ"},
    "MaxPool2DWithIndicesBackward0": {"result1": "where each window's maximum was",
                                      "self": "the input, for its shape"},
    "MmBackward0": {"self": "A, for grad_B", "mat2": "B, for grad_A"},
    "BmmBackward0": {"self": "A, for grad_B", "mat2": "B, for grad_A"},
    "ConvolutionBackward0": {"input": "the input, for the weight's gradient",
                             "weight": "the weight, for the input's gradient"},
    "NllLossBackward0": {"self": "the log-probabilities, for their shape",
                         "target": "each row's class, where the gradient goes",
                         "total_weight": "the normaliser N (or the class-weight sum)"},
    "MseLossBackward0": {"self": "x, for 2(x − y)", "target": "y, for 2(x − y)"},
    "MulBackward0": {"self": "a, for grad_b", "other": "b, for grad_a"},
    "DivBackward0": {"self": "a, for grad_b", "other": "b, for both gradients"},
    "PowBackward0": {"self": "x, for p·xᵖ⁻¹"},
    "EmbeddingBackward0": {"indices": "which rows were picked, to add the gradient back into them"},
}
