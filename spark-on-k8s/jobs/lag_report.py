"""spark-submit entry point; the job is `samsa_spark.jobs.lag_report` (installed in the image)."""

from samsa_spark.jobs.lag_report import main

if __name__ == "__main__":
    main()
