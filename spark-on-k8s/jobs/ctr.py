"""spark-submit entry point; the job is `samsa_spark.jobs.ctr` (installed in the image)."""

from samsa_spark.jobs.ctr import main

if __name__ == "__main__":
    main()
