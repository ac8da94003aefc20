if MIX:

    rule mix:
        """Equal shares of each component corpus, shuffled with a fixed seed."""
        input:
            expand("results/corpora/{corpus}.jsonl", corpus=config["mix"]["components"]),
        output:
            f"results/corpora/{MIX}.jsonl",
        log:
            f"results/logs/corpora/{MIX}.log",
        benchmark:
            f"results/benchmarks/mix/{MIX}.tsv"
        conda:
            "../../envs/analysis.yaml"
        script:
            "../scripts/build_mix.py"
