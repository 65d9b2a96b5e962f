/* commands.h: the subcommands of the cuco tool, one file each (cmd_NAME.c).
 * Each takes the arguments after its name (argv[0] is the command name) and
 * returns the process exit code (CLI_EXIT_* of cli_options.h): 0 ok, 1 the
 * work failed, 2 bad usage/input, 3 built but not verified (no GPU), 4 the
 * workspace is in use. */
#ifndef CUCO_CLI_COMMANDS_H
#define CUCO_CLI_COMMANDS_H

int cmd_doctor(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_transform(int argc, char **argv);
int cmd_evolve(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bound(int argc, char **argv);
/* Hidden: runs a program confined (the Slurm launcher's batch scripts). */
int cmd_confine_exec(int argc, char **argv);
/* 1 when candidates are to run unconfined (the command's --no-confine, or
 * CUCO_CONFINE=0), after one warning line on stderr; else 0. */
int cli_unconfined(int no_confine_flag);

#endif
