"""CN evaluation over a stream: CNEvalStatic, CNEvalDynamic and the operator-mesh baseline."""
