"""Engine plugins: vLLM (``graphtune.plugins.vllm:register``) and SGLang (``graphtune.plugins.sglang:register``).

Installed with graphtune through entry points, off unless ``GRAPHTUNE_PLUGIN=1``; then, in every engine
process that loads them: ``patch_triton()`` with GRAPHTUNE_POLICY, ``graphtune.load`` of GRAPHTUNE_LOAD, and
the coverage report (log and GRAPHTUNE_COVERAGE_OUT) when CUDA-graph capture ends. docs/plugins.md has the
details and the engine versions whose sources they were written against.
"""
