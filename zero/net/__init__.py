"""The network and its runtimes: input encoding and action index, the policy-value tower, checkpoint files, ONNX
and int8 models, batched inference. Imports zero.rules and zero.run."""
