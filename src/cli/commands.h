/* commands.h: the subcommands of the ssmtrade binary (DESIGN section 12).
 * Each returns a process exit status; errors are printed by main. */
#ifndef ST_COMMANDS_H
#define ST_COMMANDS_H

int st_cmd_info(int argc, char **argv);
int st_cmd_gradcheck(int argc, char **argv);
int st_cmd_gen_data(int argc, char **argv);
int st_cmd_baseline(int argc, char **argv);
int st_cmd_train(int argc, char **argv);
int st_cmd_eval(int argc, char **argv);
int st_cmd_labels(int argc, char **argv);
int st_cmd_smoke(int argc, char **argv);
int st_cmd_replay(int argc, char **argv);
int st_cmd_dump(int argc, char **argv);
int st_cmd_bench(int argc, char **argv);

#endif
